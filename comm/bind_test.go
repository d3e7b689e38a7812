package comm

import (
	"errors"
	"slices"
	"testing"
)

// TestBindShare: each local rank gets its own share of the allowed CPUs,
// as many as GOMAXPROCS gives it; one rank, or more ranks than CPUs, are
// left unbound.
func TestBindShare(t *testing.T) {
	cases := []struct {
		allowed    []int
		local, idx int
		want       []int
	}{
		{[]int{0, 1}, 2, 0, []int{0}},
		{[]int{0, 1}, 2, 1, []int{1}},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, 2, 1, []int{4, 5, 6, 7}},
		{[]int{0, 1, 2, 3, 4, 5, 6, 7}, 3, 2, []int{4, 5}}, // 8/3 = 2 each; CPUs 6 and 7 stay free
		{[]int{2, 5, 7}, 3, 1, []int{5}},                   // a process started on a subset
		{[]int{0, 1}, 1, 0, nil},                           // alone: the OS places it
		{[]int{0, 1}, 4, 3, nil},                           // more ranks than CPUs
		{[]int{0, 1}, 2, 2, nil},                           // a bad index
	}
	for _, c := range cases {
		if got := bindShare(c.allowed, c.local, c.idx); !slices.Equal(got, c.want) {
			t.Errorf("bindShare(%v, %d, %d) = %v, want %v", c.allowed, c.local, c.idx, got, c.want)
		}
	}
}

// TestLocalIndex: a rank's position among the ranks of its host, in rank
// order; loopback addresses are one host.
func TestLocalIndex(t *testing.T) {
	addrs := []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.1:2", "10.0.0.2:2", "10.0.0.1:3"}
	for self, want := range [][2]int{{0, 3}, {0, 2}, {1, 3}, {1, 2}, {2, 3}} {
		if idx, local := localIndex(addrs, self); idx != want[0] || local != want[1] {
			t.Errorf("rank %d: index %d of %d, want %d of %d", self, idx, local, want[0], want[1])
		}
	}
	loop := []string{"127.0.0.1:5", "[::1]:6"}
	if idx, local := localIndex(loop, 1); idx != 1 || local != 2 {
		t.Errorf("loopback: index %d of %d, want 1 of 2", idx, local)
	}
	if idx, local := localIndex(addrs, 9); idx != 0 || local != 1 {
		t.Errorf("a rank out of range: index %d of %d, want 0 of 1", idx, local)
	}
}

func TestParseBind(t *testing.T) {
	for v, want := range map[string]bool{"": true, "auto": true, "AUTO": true, "off": false, "0": false} {
		if got, err := parseBind(v); err != nil || got != want {
			t.Errorf("parseBind(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	if _, err := parseBind("cores"); !errors.Is(err, ErrBadArg) {
		t.Errorf("parseBind(cores): %v, want ErrBadArg", err)
	}
}

func TestParseCPUs(t *testing.T) {
	for v, want := range map[string][]int{"": nil, "3": {3}, "0-3": {0, 1, 2, 3}, "6-7,0-1,4": {0, 1, 4, 6, 7}, "2,2,1-2": {1, 2}} {
		if got, err := parseCPUs(v); err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUs(%q) = %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"x", "1-", "-1", "3-1", "1,,2", "0-99999999"} {
		if _, err := parseCPUs(v); !errors.Is(err, ErrBadArg) {
			t.Errorf("parseCPUs(%q): %v, want ErrBadArg", v, err)
		}
	}
}

// TestWithinSet: the job's set narrows the CPUs a rank may be bound to;
// a set naming none of them is ignored.
func TestWithinSet(t *testing.T) {
	cases := []struct{ allowed, set, want []int }{
		{[]int{0, 1, 2, 3}, nil, []int{0, 1, 2, 3}},
		{[]int{0, 1, 2, 3}, []int{2, 3}, []int{2, 3}},
		{[]int{0, 1, 2, 3}, []int{3, 9}, []int{3}},
		{[]int{0, 1}, []int{8, 9}, []int{0, 1}},
	}
	for _, c := range cases {
		if got := withinSet(c.allowed, c.set); !slices.Equal(got, c.want) {
			t.Errorf("withinSet(%v, %v) = %v, want %v", c.allowed, c.set, got, c.want)
		}
	}
	// Two ranks of a job given CPUs 4-7 of 8 share those four.
	in := withinSet([]int{0, 1, 2, 3, 4, 5, 6, 7}, []int{4, 5, 6, 7})
	for idx, want := range [][]int{{4, 5}, {6, 7}} {
		if got := bindShare(in, 2, idx); !slices.Equal(got, want) {
			t.Errorf("rank %d of 2 in the job's 4-7: %v, want %v", idx, got, want)
		}
	}
}
