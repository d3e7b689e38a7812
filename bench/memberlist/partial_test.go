package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPartialOutput runs the partial-partition scenario on a tiny
// configuration and checks the table, the CSV and the flags' errors.
func TestPartialOutput(t *testing.T) {
	csvPath := filepath.Join(t.TempDir(), "partial.csv")
	var out, log bytes.Buffer
	err := run([]string{"--partial", "both,oneway", "--sizes", "3", "--trials", "1", "--cut", "1s",
		"--after", "500ms", "--systems", "brr,memberlist", "--seed", "7", "--out", csvPath}, &out, &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Log(log.String())
	if n := strings.Count(log.String(), " trial 0: cut "); n != 4 {
		t.Errorf("%d trials reported, want 4 (two systems, two cuts)", n)
	}
	for _, want := range []string{"first suspicion ms", "back after heal ms", "oneway", "both", "memberlist", "brr"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 5 {
		t.Errorf("CSV has %d lines, want a header and 4 trials:\n%s", len(lines), b)
	}
	for _, args := range [][]string{
		{"--partial", "sideways"},
		{"--partial", "both", "--sizes", "2"},
		{"--partial", "both", "--cut", "0s"},
		{"--cut", "10s"},
		{"--partial", "both", "--pair", "nearest"},
	} {
		if err := run(args, &out, &log); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
