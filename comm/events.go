package comm

import (
	"fmt"
	"os"

	"github.com/cohort-mp/cohort/launch"
)

// eventsFromEnv is the event stream a launcher asked for: when the
// environment names a file in launch.EnvEvents (COHORT_EVENTS, set by
// launch.Config.EventsDir), Init writes the node's events there, as if
// [WithEvents] were given before opts (an explicit WithEvents wins). The
// file is created (appended to if it exists) and stays open until the
// process exits: the host writes to it until Finalize has stopped it, and
// every line is written whole by one write call, so a reader tailing the
// file sees complete lines as they come.
func eventsFromEnv(getenv func(string) string, opts []Option) ([]Option, error) {
	path := getenv(launch.EnvEvents)
	if path == "" {
		return opts, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("comm: the events file of %s: %w", launch.EnvEvents, err)
	}
	return append([]Option{WithEvents(f)}, opts...), nil
}
