package bench

import (
	"bytes"
	"strings"
	"testing"
)

// TestOSUTableAllocs: cohort's worker lines carry an allocation count per
// message as a third field; the table prints it in its own column, and the
// baselines' two-field lines still parse.
func TestOSUTableAllocs(t *testing.T) {
	sizes := []int{8, 1024}
	ours := []byte("8 12.500 3.00\n1024 20.000 2.50\n")
	raw := []byte("8 5.000\n1024 9.000\n")
	figs, err := parseFigures(ours, sizes)
	if err != nil || figs[8] != 12.5 || figs[1024] != 20 {
		t.Fatalf("figures %v, %v", figs, err)
	}
	allocs := parseAllocs(ours)
	if allocs[8] != 3 || allocs[1024] != 2.5 {
		t.Fatalf("allocs %v", allocs)
	}
	rawFigs, err := parseFigures(raw, sizes)
	if err != nil || len(parseAllocs(raw)) != 0 {
		t.Fatalf("raw lines: %v, %v", rawFigs, err)
	}
	b := &OSU{Mode: "latency", MinSize: 8, MaxSize: 1024, Unit: "µs"}
	var out bytes.Buffer
	b.WriteTable(&out, "latency", []OSUResult{{Impl: "ours", Figures: figs, Allocs: allocs}, {Impl: "tcp", Figures: rawFigs}})
	text := out.String()
	lines := strings.Split(text, "\n")
	if !strings.Contains(lines[1], "allocs/msg") {
		t.Fatalf("no allocation column in the header:\n%s", text)
	}
	var row string
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "8 ") {
			row = l
		}
	}
	if f := strings.Fields(row); len(f) != 5 || f[3] != "2.50" || f[4] != "3.00" {
		t.Fatalf("row of 8 bytes %q: want size, ours, tcp, ratio 2.50, allocs 3.00\n%s", row, text)
	}
}
