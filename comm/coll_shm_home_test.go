package comm

import (
	"slices"
	"testing"
)

func TestSegHomeCPU(t *testing.T) {
	tests := []struct {
		allowed []int
		self, p int
		want    int
	}{
		{[]int{0, 1}, 0, 4, 0},
		{[]int{0, 1}, 1, 4, 1},
		{[]int{0, 1}, 2, 4, 0},
		{[]int{0, 1}, 3, 4, 1},
		{[]int{0, 1}, 7, 8, 1},
		{[]int{2, 5, 7}, 4, 5, 5},
		{[]int{0, 1}, 1, 2, -1},       // no more ranks than CPUs: Init binds them
		{[]int{0, 1, 2, 3}, 1, 3, -1}, // fewer ranks than CPUs
		{[]int{3}, 1, 4, -1},          // one CPU: nowhere else to go
		{nil, 0, 4, -1},
	}
	for _, tt := range tests {
		if got := segHomeCPU(tt.allowed, tt.self, tt.p); got != tt.want {
			t.Errorf("segHomeCPU(%v, %d, %d) = %d, want %d", tt.allowed, tt.self, tt.p, got, tt.want)
		}
	}
}

// TestSegHomeSpreads checks that the homes of a segment's ranks fill
// every CPU evenly when the ranks outnumber them.
func TestSegHomeSpreads(t *testing.T) {
	allowed := []int{0, 1, 4}
	for p := 4; p <= 13; p++ {
		per := map[int]int{}
		for r := range p {
			per[segHomeCPU(allowed, r, p)]++
		}
		var counts []int
		for _, c := range allowed {
			counts = append(counts, per[c])
		}
		if slices.Max(counts)-slices.Min(counts) > 1 || len(per) != len(allowed) {
			t.Errorf("%d ranks on CPUs %v: %v ranks a CPU, want them even", p, allowed, counts)
		}
	}
}

func TestParseLoad(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0.50 0.40 0.30 3/512 1234\n", 0.5, true},
		{"15.90 17.66 12.01 26/260 99", 15.9, true},
		{"0.50 0.40", 0.5, true},
		{"x 0.40 0.30 3/512 1234", 0, false},
		{"-1 0.40 0.30 3/512 1234", 0, false},
		{"NaN 0.40 0.30 3/512 1234", 0, false},
		{"", 0, false},
		{"0.50", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseLoad([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseLoad(%q) = %v, %v, want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSegQuiet(t *testing.T) {
	tests := []struct {
		load    float64
		p, ncpu int
		want    bool
	}{
		{0.2, 4, 2, true},
		{5.9, 4, 2, true}, // the ranks and less than one more a CPU
		{6, 4, 2, false},
		{9.5, 8, 2, true},
		{20, 8, 2, false},
		{8.5, 5, 4, true},
	}
	for _, tt := range tests {
		if got := segQuiet(tt.load, tt.p, tt.ncpu); got != tt.want {
			t.Errorf("segQuiet(%v, %d, %d) = %v, want %v", tt.load, tt.p, tt.ncpu, got, tt.want)
		}
	}
}

func TestParseLoadAllocs(t *testing.T) {
	in := []byte("0.50 0.40 0.30 3/512 1234\n")
	if n := testing.AllocsPerRun(100, func() { parseLoad(in) }); n != 0 {
		t.Errorf("parseLoad allocates %v times, want 0: it runs inside collectives", n)
	}
}
