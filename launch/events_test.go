package launch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Config.EventsDir gives each rank its own events file in EnvEvents; a
// launcher's own EnvEvents (it runs inside a rank) is never inherited.
func TestEventsDir(t *testing.T) {
	t.Setenv(EnvEvents, "/inherited/rank-9.jsonl")
	echo := func(dir string) []string {
		var out syncBuffer
		job, err := Start(context.Background(), Config{N: 3, Program: "/bin/sh",
			Args: []string{"-c", `echo "$COHORT_RANK:$COHORT_EVENTS"`}, EventsDir: dir, Stdout: &out})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := job.Wait(); err != nil {
			t.Fatal(err)
		}
		lines := strings.Fields(out.String())
		slices.Sort(lines)
		return lines
	}
	dir := t.TempDir()
	got := echo(dir)
	var want []string
	for r := range 3 {
		want = append(want, fmt.Sprintf("%d:%s", r, EventsPath(dir, r)))
	}
	if !slices.Equal(got, want) {
		t.Errorf("with EventsDir: ranks printed %q, want %q", got, want)
	}
	if got, want := echo(""), []string{"0:", "1:", "2:"}; !slices.Equal(got, want) {
		t.Errorf("without EventsDir: ranks printed %q, want %q (no inherited %s)", got, want, EnvEvents)
	}
}
