#include "textflag.h"

// func segHasRDPID() bool
// CPUID leaf 7, subleaf 0, ECX bit 22, when the processor has leaf 7.
TEXT ·segHasRDPID(SB), NOSPLIT, $0-1
	MOVL $0, AX
	CPUID
	CMPL AX, $7
	JB   none
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	SHRL $22, CX
	ANDL $1, CX
	MOVB CX, ret+0(FP)
	RET
none:
	MOVB $0, ret+0(FP)
	RET

// func segRDPID() uint32
// RDPID RAX (F3 0F C7 /7): the processor's TSC_AUX, where Linux keeps
// the CPU's number (low 12 bits) and its node.
TEXT ·segRDPID(SB), NOSPLIT, $0-4
	BYTE $0xF3; BYTE $0x0F; BYTE $0xC7; BYTE $0xF8
	MOVL AX, ret+0(FP)
	RET
