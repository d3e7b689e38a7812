package comm

import "testing"

func TestLocalRanksAndProcs(t *testing.T) {
	addrs := []string{"127.0.0.1:5000", "127.0.0.1:5001", "10.0.0.2:5000", "10.0.0.2:5001", "10.0.0.2:5002", "[::1]:7000", "bad"}
	for _, c := range []struct{ self, want int }{{0, 3}, {1, 3}, {2, 3}, {4, 3}, {5, 3}, {6, 1}, {9, 1}} {
		if got := localRanks(addrs, c.self); got != c.want {
			t.Errorf("localRanks(self %d) = %d, want %d", c.self, got, c.want)
		}
	}
	none := func(string) string { return "" }
	set := func(k string) string {
		if k == "GOMAXPROCS" {
			return "3"
		}
		return ""
	}
	for _, c := range []struct {
		env                  func(string) string
		cpus, current, local int
		want                 int
	}{
		{none, 2, 2, 2, 1},   // two ranks on two cores: one P each
		{none, 2, 2, 4, 1},   // oversubscribed: still one
		{none, 8, 8, 2, 4},   // four each
		{none, 8, 8, 1, 0},   // alone: unchanged
		{none, 8, 2, 2, 0},   // already fewer: unchanged
		{set, 2, 3, 2, 0},    // the user's GOMAXPROCS wins
		{none, 16, 16, 0, 0}, // no count: treated as alone
	} {
		if got := procsFor(c.env, c.cpus, c.current, c.local); got != c.want {
			t.Errorf("procsFor(cpus %d, current %d, local %d) = %d, want %d", c.cpus, c.current, c.local, got, c.want)
		}
	}
}
