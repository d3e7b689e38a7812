package coll

import (
	"errors"
	"testing"
)

func TestAsBytesRoundTrip(t *testing.T) {
	if !LittleEndian() {
		t.Skip("cohort assumes little-endian hosts")
	}
	s := []int32{1, -2, 0x01020304}
	b := AsBytes(s)
	if len(b) != 12 || b[0] != 1 || b[8] != 4 || b[11] != 1 {
		t.Fatalf("AsBytes = %v, want little-endian bytes of %v", b, s)
	}
	b[0] = 7 // a view: the write shows in s
	if s[0] != 7 {
		t.Fatalf("AsBytes copied: s[0] = %d, want 7", s[0])
	}
	back, err := FromBytes[int32](b)
	if err != nil || len(back) != 3 || back[2] != 0x01020304 {
		t.Fatalf("FromBytes = %v, %v", back, err)
	}
	if AsBytes([]float64(nil)) != nil {
		t.Fatal("AsBytes(nil) != nil")
	}
	if e, err := FromBytes[float64](nil); err != nil || len(e) != 0 {
		t.Fatalf("FromBytes(nil) = %v, %v", e, err)
	}
}

func TestFromBytesBadLength(t *testing.T) {
	for _, n := range []int{1, 3, 7, 9} {
		if _, err := FromBytes[float64](make([]byte, n)); !errors.Is(err, ErrSize) {
			t.Errorf("FromBytes[float64](%d bytes) err = %v, want ErrSize", n, err)
		}
	}
	if _, err := FromBytes[int16](make([]byte, 5)); !errors.Is(err, ErrSize) {
		t.Errorf("FromBytes[int16](5 bytes) err = %v, want ErrSize", err)
	}
}

func TestFromBytesMisaligned(t *testing.T) {
	buf := make([]byte, 17)
	want := []float64{1.5, -2.25}
	copy(buf[1:], AsBytes(want))
	got, err := FromBytes[float64](buf[1:]) // misaligned: must copy, not fault
	if err != nil || len(got) != 2 || got[0] != 1.5 || got[1] != -2.25 {
		t.Fatalf("FromBytes(misaligned) = %v, %v, want %v", got, err, want)
	}
}

func TestOps(t *testing.T) {
	a := []int64{1, 5, 12}
	b := []int64{3, 2, 10}
	cases := []struct {
		op   Op[int64]
		want []int64
	}{
		{Sum[int64](), []int64{4, 7, 22}},
		{Prod[int64](), []int64{3, 10, 120}},
		{Min[int64](), []int64{1, 2, 10}},
		{Max[int64](), []int64{3, 5, 12}},
		{BAnd[int64](), []int64{1, 0, 8}},
		{BOr[int64](), []int64{3, 7, 14}},
		{BXor[int64](), []int64{2, 7, 6}},
	}
	for _, c := range cases {
		x := append([]int64(nil), a...)
		c.op.left(x, append([]int64(nil), b...))
		for i := range x {
			if x[i] != c.want[i] {
				t.Errorf("%s(%v, %v) = %v, want %v", c.op.Name(), a, b, x, c.want)
				break
			}
		}
	}
	// right on a non-commutative operator keeps the order: b = a ⊕ b.
	cat := NewOp("cat", func(inout, in []int64) {
		for i := range inout {
			inout[i] = inout[i]*10 + in[i]
		}
	}, false)
	x, y := []int64{1}, []int64{2}
	cat.right(x, y)
	if y[0] != 12 {
		t.Errorf("right(1, 2) = %d, want 12", y[0])
	}
	var zero Op[int64]
	if zero.Valid() {
		t.Error("zero Op is valid")
	}
}
