package coll

import (
	"fmt"
	"unsafe"
)

// Elem is the set of element types the collectives move and reduce. Values
// travel in the host's byte order: AsBytes is a view of the slice's memory,
// not an encoding. Every rank of a job must therefore share one byte order;
// cohort assumes little-endian hosts (amd64, arm64, riscv64, …), which is
// what every supported GOARCH is. littleEndian records the host's order so
// that a test can refuse to run on a big-endian machine instead of silently
// exchanging mismatched bytes with little-endian peers.
type Elem interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint |
		~float32 | ~float64
}

// Integer is the subset of Elem on which the bitwise operators are defined.
type Integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint
}

// littleEndian is true on little-endian hosts.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// LittleEndian reports whether this host stores integers little-endian, the
// byte order every rank of a cohort job is assumed to share.
func LittleEndian() bool { return littleEndian }

// SizeOf returns the size of one T in bytes.
func SizeOf[T Elem]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// AsBytes returns the bytes of s without copying: writes through either slice
// are visible in the other, and the result is valid as long as s is. The
// bytes are in host order (see Elem). A nil or empty s gives an empty slice.
func AsBytes[T Elem](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*SizeOf[T]())
}

// FromBytes returns b as a []T. It shares b's memory when b is suitably
// aligned for T (always the case for buffers a Transport allocates with make
// for 8-byte or larger sizes) and copies it otherwise, so the result is always
// safe to use. A length that is not a multiple of the element size is an
// error wrapping ErrSize.
func FromBytes[T Elem](b []byte) ([]T, error) {
	size := SizeOf[T]()
	if len(b)%size != 0 {
		return nil, fmt.Errorf("%w: %d bytes for %d-byte elements", ErrSize, len(b), size)
	}
	n := len(b) / size
	if n == 0 {
		return []T{}, nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	var z T
	if uintptr(p)%unsafe.Alignof(z) == 0 {
		return unsafe.Slice((*T)(p), n), nil
	}
	out := make([]T, n)
	copy(AsBytes(out), b)
	return out, nil
}

// overlap reports whether a and b share any element's memory.
func overlap[T Elem](a, b []T) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	sz := uintptr(SizeOf[T]())
	return pa < pb+uintptr(len(b))*sz && pb < pa+uintptr(len(a))*sz
}
