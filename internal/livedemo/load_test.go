package livedemo

import (
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	got := parseProcStat("cpu  77073 5 16894 23037 71 10 333 28 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
	want := cpuSample{busy: (77073 + 5 + 16894 + 10 + 333) * time.Second / userHz, steal: 28 * time.Second / userHz, ok: true}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if s := parseProcStat("intr 1 2 3\n"); s.ok {
		t.Errorf("a file without a cpu line: %+v", s)
	}
}

// The summary says the machine was shared only when other processes took
// a noticeable share of the cores during a run, and then says how much.
func TestLoadNote(t *testing.T) {
	idle := cpuSample{busy: 10 * time.Second, ok: true}
	quiet := loadOf(idle, cpuSample{busy: 14 * time.Second, ok: true}, 3900*time.Millisecond, 2*time.Second)
	quiet.cores = 2
	busy := loadOf(idle, cpuSample{busy: 30 * time.Second, steal: time.Second, ok: true}, 4*time.Second, 10*time.Second)
	busy.cores = 2
	if note := loadNote(quiet, quiet); note != nil {
		t.Errorf("0.1 s of others in 4 s of two cores: note %q", note)
	}
	note := strings.Join(loadNote(quiet, busy), "")
	for _, want := range []string{"other processes used 16.0 s", "and 0.1 s during the failure-free one", "the hypervisor 1.0 s and 0.0 s", "on 2 cores"} {
		if !strings.Contains(note, want) {
			t.Errorf("note %q lacks %q", note, want)
		}
	}
	if note := loadNote(machineLoad{}, machineLoad{}); note != nil {
		t.Errorf("no samples: note %q", note)
	}
}
