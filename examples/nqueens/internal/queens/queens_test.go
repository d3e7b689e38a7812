package queens

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

// naiveCount counts solutions by trying every column of every row with an
// explicit attack check: an independent reference for small boards.
func naiveCount(n int) uint64 {
	cols := make([]int, 0, n)
	var rec func() uint64
	rec = func() uint64 {
		r := len(cols)
		if r == n {
			return 1
		}
		var total uint64
		for c := 0; c < n; c++ {
			ok := true
			for pr, pc := range cols {
				if pc == c || r-pr == c-pc || r-pr == pc-c {
					ok = false
					break
				}
			}
			if ok {
				cols = append(cols, c)
				total += rec()
				cols = cols[:len(cols)-1]
			}
		}
		return total
	}
	return rec()
}

func TestCountMatchesNaive(t *testing.T) {
	for n := 1; n <= 9; n++ {
		got, err := Count(n)
		if err != nil {
			t.Fatal(err)
		}
		if want := naiveCount(n); got != want {
			t.Errorf("Count(%d) = %d, naive reference %d", n, got, want)
		}
	}
}

// The must-show list: exact counts for n = 8 … 13 here, 14 … 16 in
// TestCountLarge.
func TestCountKnown(t *testing.T) {
	for n := 1; n <= 13; n++ {
		got, err := Count(n)
		if err != nil {
			t.Fatal(err)
		}
		if got != Known[n] {
			t.Errorf("Count(%d) = %d, want %d", n, got, Known[n])
		}
	}
}

func TestCountLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("n = 14 … 16 take seconds; run without -short")
	}
	last := 16
	if raceEnabled {
		last = 15
		t.Log("race detector on: n = 16 is checked by BenchmarkCount only")
	}
	for n := 14; n <= last; n++ {
		got, err := Count(n)
		if err != nil {
			t.Fatal(err)
		}
		if got != Known[n] {
			t.Errorf("Count(%d) = %d, want %d", n, got, Known[n])
		}
	}
}

// Splitting a prefix into its children never changes the total: the
// invariant that lets work units be split and stolen (Phoenix §5.2.2).
func TestChildrenSumToParent(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d (replay: set seed in TestChildrenSumToParent)", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for n := 4; n <= 11; n++ {
		for trial := 0; trial < 20; trial++ {
			// Random walk down the tree.
			var p Prefix
			for len(p) < n && rng.IntN(3) != 0 {
				cs, err := Children(n, p)
				if err != nil {
					t.Fatal(err)
				}
				if len(cs) == 0 {
					break
				}
				p = cs[rng.IntN(len(cs))]
			}
			parent, err := CountPrefix(n, p)
			if err != nil {
				t.Fatal(err)
			}
			cs, err := Children(n, p)
			if err != nil {
				t.Fatal(err)
			}
			var sum uint64
			for _, c := range cs {
				v, err := CountPrefix(n, c)
				if err != nil {
					t.Fatal(err)
				}
				sum += v
			}
			if len(p) == n {
				sum = parent // a complete board has no children
			}
			if sum != parent {
				t.Fatalf("n=%d prefix %v: children sum %d, prefix count %d", n, p, sum, parent)
			}
		}
	}
}

func TestPrefixesCoverTree(t *testing.T) {
	for _, n := range []int{8, 10, 12} {
		for depth := 0; depth <= 4; depth++ {
			units, err := Prefixes(n, depth)
			if err != nil {
				t.Fatal(err)
			}
			var sum uint64
			for _, u := range units {
				if len(u) != depth {
					t.Fatalf("n=%d depth %d: unit %v has %d queens", n, depth, u, len(u))
				}
				c, err := CountPrefix(n, u)
				if err != nil {
					t.Fatal(err)
				}
				sum += c
			}
			if sum != Known[n] {
				t.Errorf("n=%d depth %d: %d units sum to %d, want %d", n, depth, len(units), sum, Known[n])
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	cases := []struct {
		name string
		n    int
		p    Prefix
		want error
	}{
		{"n zero", 0, nil, ErrBoardSize},
		{"n too big", MaxN + 1, nil, ErrBoardSize},
		{"column outside", 8, Prefix{0, 9}, ErrPrefix},
		{"mirrored half", 8, Prefix{4}, ErrPrefix},
		{"same column", 8, Prefix{0, 0}, ErrPrefix},
		{"diagonal", 8, Prefix{0, 1}, ErrPrefix},
		{"too long", 4, Prefix{1, 3, 0, 2, 0}, ErrPrefix},
	}
	for _, c := range cases {
		if _, err := CountPrefix(c.n, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: CountPrefix error %v, want %v", c.name, err, c.want)
		}
		if _, err := Children(c.n, c.p); !errors.Is(err, c.want) {
			t.Errorf("%s: Children error %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := Prefixes(8, 9); !errors.Is(err, ErrPrefix) {
		t.Errorf("Prefixes(8, 9) error %v, want ErrPrefix", err)
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	units, err := Prefixes(9, 3)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	for _, u := range units {
		buf = u.AppendBinary(buf)
	}
	for i, want := range units {
		var got Prefix
		got, buf, err = DecodePrefix(buf)
		if err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("unit %d: got %v, want %v", i, got, want)
		}
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left over", len(buf))
	}
	for _, bad := range [][]byte{nil, {3, 1}, {200}} {
		if _, _, err := DecodePrefix(bad); !errors.Is(err, ErrPrefix) {
			t.Errorf("DecodePrefix(%v) error %v, want ErrPrefix", bad, err)
		}
	}
}

func FuzzDecodePrefix(f *testing.F) {
	f.Add([]byte{2, 0, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, rest, err := DecodePrefix(b)
		if err != nil {
			return
		}
		if len(p)+len(rest)+1 != len(b) {
			t.Fatalf("decoded %d + rest %d from %d bytes", len(p), len(rest), len(b))
		}
		_, _ = CountPrefix(8, p) // must not panic on any decoded prefix
	})
}

// BenchmarkCount measures single-threaded counting of whole boards.
func BenchmarkCount(b *testing.B) {
	for _, n := range []int{12, 14, 15, 16} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				got, err := Count(n)
				if err != nil || got != Known[n] {
					b.Fatalf("Count(%d) = %d, %v; want %d", n, got, err, Known[n])
				}
			}
		})
	}
}
