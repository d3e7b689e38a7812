package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cohort model replication writes Figure 10's CSV, plot and report, and
// its checks pass; an unknown model is a usage error.
func TestModelReplication(t *testing.T) {
	out := t.TempDir()
	code, stdout, stderr := run(t, "model", "replication", "--out", out)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	csv, err := os.ReadFile(filepath.Join(out, "replication.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(csv), "\n"); lines != 41 {
		t.Errorf("replication.csv has %d lines, want a header and 40 rows", lines)
	}
	for _, f := range []string{"replication.png", "replication.svg", "report.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if code, _, _ := run(t, "model", "weather"); code != exitUsage {
		t.Errorf("unknown model: exit %d, want %d", code, exitUsage)
	}
}

// cohort model checkpoint prints Young's and Daly's intervals and the
// waste around Daly's, least at ×1; bad durations are usage errors.
func TestModelCheckpoint(t *testing.T) {
	code, stdout, stderr := run(t, "model", "checkpoint", "--cost", "5m", "--restart", "1m", "--mtbf", "24h")
	if code != exitOK || !strings.Contains(stdout, "optimum interval: Young 2h0m0s, Daly 1h56m41.388") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"--cost", "0", "--mtbf", "1h"},
		{"--cost", "1s", "--mtbf", "0"},
		{"--cost", "1s", "--mtbf", "1h", "--restart", "-1s"},
		{"--cost", "1s", "--mtbf", "1h", "extra"},
	} {
		if code, _, stderr := run(t, append([]string{"model", "checkpoint"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d (stderr %q), want %d", args, code, stderr, exitUsage)
		}
	}
}

// cohort model tradeoff sets checkpoints beside replication: at a job
// MTBF of 1 h with the defaults, checkpoints cost 0.09%, r = 2 (β = 0.1)
// 12.06% (a 1.84% chance that a rank loses both replicas), and a run
// restarted from scratch e−1 times more; with --out it writes the CSV and
// the plot; bad settings are usage errors.
func TestModelTradeoff(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := run(t, "model", "tradeoff", "--out", dir)
	row := regexp.MustCompile(`(?m)^\s+1h0m0s\s+3\.174s\s+1\.0009×\s+2\.7183×\s+1\.1206×\s+1\.84e-02\s+1\.2005×$`)
	if code != exitOK || !row.MatchString(stdout) {
		t.Fatalf("exit %d, no row for 1 h matching %v\n%s\n%s", code, row, stdout, stderr)
	}
	for _, f := range []string{"tradeoff.csv", "tradeoff.png", "tradeoff.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	for _, args := range [][]string{
		{"--work", "0"}, {"-p", "0"}, {"--cost", "0"}, {"--restart", "-1s"}, {"-beta", "-1"}, {"extra"},
	} {
		if code, _, stderr := run(t, append([]string{"model", "tradeoff"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d (stderr %q), want %d", args, code, stderr, exitUsage)
		}
	}
}
