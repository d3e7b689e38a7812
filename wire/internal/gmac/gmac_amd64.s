#include "textflag.h"

// GHASH's multiplications (crypto/cipher's GCM, gcm_amd64.s, does the
// same on one block at a time): operands byte-reversed, the multiplier
// in star form, four carry-less products per block (low, high and the
// two middle ones), and the 256-bit result reduced modulo
// x^128 + x^7 + x^2 + x + 1 in two folds by the constant poly.

DATA bswap<>+0(SB)/8, $0x08090a0b0c0d0e0f
DATA bswap<>+8(SB)/8, $0x0001020304050607
GLOBL bswap<>(SB), RODATA|NOPTR, $16

DATA poly<>+0(SB)/8, $0x0000000000000001
DATA poly<>+8(SB)/8, $0xc200000000000000
GLOBL poly<>(SB), RODATA|NOPTR, $16

// MUL sets lo, hi and mid to the products of a and b (mid: the sum of
// the two middle ones); t is scratch.
#define MUL(a, b, lo, hi, mid, t) \
	VPCLMULQDQ $0x00, b, a, lo  \
	VPCLMULQDQ $0x11, b, a, hi  \
	VPCLMULQDQ $0x01, b, a, mid \
	VPCLMULQDQ $0x10, b, a, t   \
	VPXOR      t, mid, mid

// REDUCE folds lo, hi and mid (X14 holds poly) into out; t is scratch.
#define REDUCE(lo, hi, mid, t, out) \
	VPSLLDQ    $8, mid, t      \
	VPSRLDQ    $8, mid, mid    \
	VPXOR      t, lo, lo       \
	VPXOR      mid, hi, hi     \
	VPCLMULQDQ $0x01, lo, X14, t \
	VPSHUFD    $0x4e, lo, lo   \
	VPXOR      t, lo, lo       \
	VPCLMULQDQ $0x01, lo, X14, t \
	VPSHUFD    $0x4e, lo, lo   \
	VPXOR      t, lo, lo       \
	VPXOR      hi, lo, out

// func gfMul(y, h *[2]uint64)
TEXT ·gfMul(SB), NOSPLIT, $0-16
	MOVQ    y+0(FP), AX
	MOVQ    h+8(FP), BX
	VMOVDQU (AX), X0
	VMOVDQU (BX), X1
	VMOVDQU poly<>(SB), X14
	MUL(X0, X1, X2, X3, X4, X5)
	REDUCE(X2, X3, X4, X5, X0)
	VMOVDQU X0, (AX)
	RET

// PRODUCTS adds the products of the four blocks of d by the four powers
// of h to the accumulators Z5 (low), Z6 (high) and Z7 (middle).
#define PRODUCTS(d, h) \
	VPCLMULQDQ $0x00, h, d, Z8  \
	VPCLMULQDQ $0x11, h, d, Z9  \
	VPXORQ     Z8, Z5, Z5       \
	VPXORQ     Z9, Z6, Z6       \
	VPCLMULQDQ $0x01, h, d, Z8  \
	VPCLMULQDQ $0x10, h, d, Z9  \
	VPTERNLOGQ $0x96, Z8, Z9, Z7

// FOLD adds the four 128-bit lanes of z (whose low lanes are y and x)
// into x; t and u are scratch.
#define FOLD(z, y, x, t, u) \
	VEXTRACTI64X4 $1, z, t  \
	VPXOR         t, y, y   \
	VEXTRACTI128  $1, y, u  \
	VPXOR         u, x, x

// func ghash16(y *[2]uint64, powers *[16][2]uint64, data *byte, groups int)
TEXT ·ghash16(SB), NOSPLIT, $0-32
	MOVQ            y+0(FP), AX
	MOVQ            powers+8(FP), BX
	MOVQ            data+16(FP), SI
	MOVQ            groups+24(FP), CX
	VBROADCASTI32X4 bswap<>(SB), Z31
	VMOVDQU         poly<>(SB), X14
	VMOVDQU64       0(BX), Z24
	VMOVDQU64       64(BX), Z25
	VMOVDQU64       128(BX), Z26
	VMOVDQU64       192(BX), Z27
	VMOVDQU         (BX), X13
	VMOVDQU         (AX), X0

loop:
	VMOVDQU64  0(SI), Z1
	VMOVDQU64  64(SI), Z2
	VMOVDQU64  128(SI), Z3
	VMOVDQU64  192(SI), Z4
	VPSHUFB    Z31, Z1, Z1
	VPSHUFB    Z31, Z2, Z2
	VPSHUFB    Z31, Z3, Z3
	VPSHUFB    Z31, Z4, Z4
	VPCLMULQDQ $0x00, Z24, Z1, Z5
	VPCLMULQDQ $0x11, Z24, Z1, Z6
	VPCLMULQDQ $0x01, Z24, Z1, Z7
	VPCLMULQDQ $0x10, Z24, Z1, Z8
	VPXORQ     Z8, Z7, Z7
	PRODUCTS(Z2, Z25)
	PRODUCTS(Z3, Z26)
	PRODUCTS(Z4, Z27)
	FOLD(Z5, Y5, X5, Y8, X9)
	FOLD(Z6, Y6, X6, Y8, X9)
	FOLD(Z7, Y7, X7, Y8, X9)
	// The running hash times H^16, added as if to the group's first block.
	MUL(X0, X13, X9, X10, X11, X12)
	VPXOR      X9, X5, X5
	VPXOR      X10, X6, X6
	VPXOR      X11, X7, X7
	REDUCE(X5, X6, X7, X12, X0)
	ADDQ       $256, SI
	DECQ       CX
	JNZ        loop

	VMOVDQU X0, (AX)
	VZEROUPPER
	RET

// KPRODUCTS is PRODUCTS with three carry-less products per block
// instead of four (Karatsuba): the middle one is (a0+a1)(b0+b1), whose
// sum over the blocks becomes the sum of the middle products once the
// sums of the low and the high ones are added to it; k holds b0+b1 in
// each lane's low word.
#define KPRODUCTS(d, h, k) \
	VPCLMULQDQ $0x00, h, d, Z8  \
	VPCLMULQDQ $0x11, h, d, Z9  \
	VPXORQ     Z8, Z5, Z5       \
	VPXORQ     Z9, Z6, Z6       \
	VPSHUFD    $0x4e, d, Z8     \
	VPXORQ     d, Z8, Z8        \
	VPCLMULQDQ $0x00, k, Z8, Z9 \
	VPXORQ     Z9, Z7, Z7

// func ghash32(y *[2]uint64, t *table, data *byte, pairs int)
//
// ghash16 on two groups at a time, with KPRODUCTS: their thirty-two
// products summed before one reduction, so that the running hash's
// multiplication and reduction, which each group waits for, come once
// per 512 bytes. t holds H^32 … H^1, then each power's mid key (see
// KPRODUCTS).
TEXT ·ghash32(SB), NOSPLIT, $0-32
	MOVQ            y+0(FP), AX
	MOVQ            t+8(FP), BX
	MOVQ            data+16(FP), SI
	MOVQ            pairs+24(FP), CX
	VBROADCASTI32X4 bswap<>(SB), Z31
	VMOVDQU         poly<>(SB), X14
	VMOVDQU64       0(BX), Z20
	VMOVDQU64       64(BX), Z21
	VMOVDQU64       128(BX), Z22
	VMOVDQU64       192(BX), Z23
	VMOVDQU64       256(BX), Z24
	VMOVDQU64       320(BX), Z25
	VMOVDQU64       384(BX), Z26
	VMOVDQU64       448(BX), Z27
	VMOVDQU         (BX), X13
	VMOVDQU         (AX), X0

loop:
	VMOVDQU64  0(SI), Z1
	VMOVDQU64  64(SI), Z2
	VMOVDQU64  128(SI), Z3
	VMOVDQU64  192(SI), Z4
	VMOVDQU64  256(SI), Z15
	VMOVDQU64  320(SI), Z16
	VMOVDQU64  384(SI), Z17
	VMOVDQU64  448(SI), Z18
	VPSHUFB    Z31, Z1, Z1
	VPSHUFB    Z31, Z2, Z2
	VPSHUFB    Z31, Z3, Z3
	VPSHUFB    Z31, Z4, Z4
	VPSHUFB    Z31, Z15, Z15
	VPSHUFB    Z31, Z16, Z16
	VPSHUFB    Z31, Z17, Z17
	VPSHUFB    Z31, Z18, Z18
	VPCLMULQDQ $0x00, Z20, Z1, Z5
	VPCLMULQDQ $0x11, Z20, Z1, Z6
	VPSHUFD    $0x4e, Z1, Z8
	VPXORQ     Z1, Z8, Z8
	VPCLMULQDQ $0x00, 512(BX), Z8, Z7
	KPRODUCTS(Z2, Z21, 576(BX))
	KPRODUCTS(Z3, Z22, 640(BX))
	KPRODUCTS(Z4, Z23, 704(BX))
	KPRODUCTS(Z15, Z24, 768(BX))
	KPRODUCTS(Z16, Z25, 832(BX))
	KPRODUCTS(Z17, Z26, 896(BX))
	KPRODUCTS(Z18, Z27, 960(BX))
	FOLD(Z5, Y5, X5, Y8, X9)
	FOLD(Z6, Y6, X6, Y8, X9)
	FOLD(Z7, Y7, X7, Y8, X9)
	VPTERNLOGQ $0x96, X5, X6, X7
	// The running hash times H^32, added as if to the pair's first block.
	MUL(X0, X13, X9, X10, X11, X12)
	VPXOR      X9, X5, X5
	VPXOR      X10, X6, X6
	VPXOR      X11, X7, X7
	REDUCE(X5, X6, X7, X12, X0)
	ADDQ       $512, SI
	DECQ       CX
	JNZ        loop

	VMOVDQU X0, (AX)
	VZEROUPPER
	RET
