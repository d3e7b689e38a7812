package topo

import (
	"fmt"
	"testing"
)

var sink int

func BenchmarkCubeNeighbors(b *testing.B) {
	for _, n := range []int{64, 1000, 4096, 100_000} {
		c, _ := NewCube(n)
		buf := make([]int, 0, 64)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			v := 0
			for b.Loop() {
				buf = c.AppendNeighbors(buf[:0], v)
				sink += len(buf)
				if v++; v == n {
					v = 0
				}
			}
		})
	}
}

func BenchmarkCubeGraph(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		c, _ := NewCube(n)
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink += len(c.Graph())
			}
		})
	}
}

func BenchmarkRadix(b *testing.B) {
	for _, a := range []int{2, 16} {
		t, _ := NewRadix(100_000, a)
		buf := make([]int, 0, a)
		b.Run(fmt.Sprintf("a=%d/Parent", a), func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink += t.Parent(i)
				i = (i + 7919) % 100_000
			}
		})
		b.Run(fmt.Sprintf("a=%d/Children", a), func(b *testing.B) {
			i := 0
			for b.Loop() {
				lo, hi := t.Children(i)
				sink += hi - lo
				i = (i + 7919) % 100_000
			}
		})
		b.Run(fmt.Sprintf("a=%d/AppendChildren", a), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				buf = t.AppendChildren(buf[:0], i)
				sink += len(buf)
				i = (i + 7919) % 100_000
			}
		})
		b.Run(fmt.Sprintf("a=%d/Depth", a), func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink += t.Depth(i)
				i = (i + 7919) % 100_000
			}
		})
		b.Run(fmt.Sprintf("a=%d/SubtreeSize", a), func(b *testing.B) {
			i := 0
			for b.Loop() {
				sink += t.SubtreeSize(i)
				i = (i + 7919) % 100_000
			}
		})
		b.Run(fmt.Sprintf("a=%d/Height", a), func(b *testing.B) {
			for b.Loop() {
				sink += t.Height()
			}
		})
	}
}

func BenchmarkScheduleTarget(b *testing.B) {
	for _, s := range []Schedule{BinaryRoundRobin, DoubleBinaryRoundRobin} {
		b.Run(s.String(), func(b *testing.B) {
			step := 0
			for b.Loop() {
				d, _ := s.Target(step%1000, s.Round(step, 1000), 1000)
				sink += d
				step++
			}
		})
	}
}
