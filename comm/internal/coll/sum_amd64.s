#include "textflag.h"

// func addFloat64SSE2(dst, src *float64, n int)
// dst[i] += src[i] for i < n: eight elements per round in four pairs,
// then one at a time.
TEXT ·addFloat64SSE2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

loop8:
	CMPQ   CX, $8
	JLT    tail
	MOVUPD 0(DI), X0
	MOVUPD 16(DI), X1
	MOVUPD 32(DI), X2
	MOVUPD 48(DI), X3
	MOVUPD 0(SI), X4
	MOVUPD 16(SI), X5
	MOVUPD 32(SI), X6
	MOVUPD 48(SI), X7
	ADDPD  X4, X0
	ADDPD  X5, X1
	ADDPD  X6, X2
	ADDPD  X7, X3
	MOVUPD X0, 0(DI)
	MOVUPD X1, 16(DI)
	MOVUPD X2, 32(DI)
	MOVUPD X3, 48(DI)
	ADDQ   $64, DI
	ADDQ   $64, SI
	SUBQ   $8, CX
	JMP    loop8

tail:
	TESTQ CX, CX
	JZ    done
	MOVSD 0(DI), X0
	ADDSD 0(SI), X0
	MOVSD X0, 0(DI)
	ADDQ  $8, DI
	ADDQ  $8, SI
	DECQ  CX
	JMP   tail

done:
	RET
