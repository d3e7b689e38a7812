package gmac

import "golang.org/x/sys/cpu"

// fast: the processor has what ghash16 uses (and the operating system
// saves the AVX-512 registers, which cpu checks).
var fast = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL &&
	cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasPCLMULQDQ && cpu.X86.HasAVX2

// gfMul sets y to y·h: y as fieldOf gives it, h as star gives it.
//
//go:noescape
func gfMul(y, h *[2]uint64)

// ghash16 hashes groups×16 blocks of data into y: y = (y ⊕ B₀)·H¹⁶ ⊕
// B₁·H¹⁵ ⊕ … ⊕ B₁₅·H per group, with powers = H¹⁶ … H¹ (star form).
//
//go:noescape
func ghash16(y *[2]uint64, powers *[16][2]uint64, data *byte, groups int)

// ghash32 hashes pairs×32 blocks of data into y as ghash16 does, with
// t's powers H³² … H¹ (star form) and their halves' sums.
//
//go:noescape
func ghash32(y *[2]uint64, t *table, data *byte, pairs int)
