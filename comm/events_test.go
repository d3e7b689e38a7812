package comm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cohort-mp/cohort/launch"
)

// The launcher's COHORT_EVENTS becomes the session's event stream, before
// the caller's options (an explicit WithEvents wins); an unset variable
// changes nothing; a file that cannot be created is an error naming it.
func TestEventsFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rank-3.jsonl")
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == launch.EnvEvents {
				return v
			}
			return ""
		}
	}
	apply := func(opts []Option) options {
		var o options
		for _, opt := range opts {
			opt(&o)
		}
		return o
	}

	opts, err := eventsFromEnv(env(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := apply(opts).events.(*os.File)
	if !ok {
		t.Fatalf("events = %T, want the file", apply(opts).events)
	}
	defer f.Close()
	if _, err := f.Write([]byte("{}\n")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "{}\n" {
		t.Fatalf("%s holds %q (%v)", path, b, err)
	}

	var mine bytes.Buffer
	opts, err = eventsFromEnv(env(path), []Option{WithEvents(&mine)})
	if err != nil {
		t.Fatal(err)
	}
	if w := apply(opts).events; w != &mine {
		t.Errorf("an explicit WithEvents lost to %s: events = %T", launch.EnvEvents, w)
	}
	apply(opts[:1]).events.(*os.File).Close()

	if opts, err := eventsFromEnv(env(""), nil); err != nil || len(opts) != 0 {
		t.Errorf("unset: %d options, %v", len(opts), err)
	}
	if _, err := eventsFromEnv(env(filepath.Join(path, "no", "dir")), nil); err == nil || !strings.Contains(err.Error(), launch.EnvEvents) {
		t.Errorf("a file in a missing directory: error %v, want one naming %s", err, launch.EnvEvents)
	}
}
