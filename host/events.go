package host

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// EventLine is one line of the event stream (Config.Events), encoded as a
// JSON object:
//
//	{"time":"2025-01-02T15:04:05.123456789Z","uptime_ns":1500000,"node":3,
//	 "type":"core.Suspected","fields":{"Node":5}}
//
// Type is the event's Go type as package.Name (a pointer's element type).
// Fields is the event encoded by encoding/json: a struct's exported fields
// by name (core.MembersChanged gives {"Epoch":2,"Members":[0,1,2]}); a
// value that is not a struct is wrapped as {"value": ...}. An event that
// encoding/json cannot encode (a channel field, a cycle) gives
// {"error": ..., "value": its fmt %v form} rather than no line.
type EventLine struct {
	Time     time.Time       `json:"time"`      // wall clock, for joining logs
	UptimeNs int64           `json:"uptime_ns"` // the host's monotonic Env.Now
	Node     core.NodeID     `json:"node"`      // the emitting node
	Type     string          `json:"type"`
	Fields   json.RawMessage `json:"fields"`
}

// eventWriter writes event lines to one writer.
type eventWriter struct {
	w   io.Writer
	buf []byte
}

func (ew *eventWriter) write(now time.Time, uptime time.Duration, node core.NodeID, typ string, ev core.Event) error {
	line := EventLine{Time: now.UTC(), UptimeNs: int64(uptime), Node: node, Type: typ, Fields: EventFields(ev)}
	b, err := json.Marshal(line)
	if err != nil {
		// Fields is valid JSON by construction; this is a bug.
		panic(fmt.Sprintf("host: encoding an event line: %v", err))
	}
	ew.buf = append(append(ew.buf[:0], b...), '\n')
	_, err = ew.w.Write(ew.buf)
	return err
}

// EventFields encodes ev as the "fields" member of its [EventLine].
func EventFields(ev core.Event) json.RawMessage {
	v := reflect.ValueOf(ev)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	var x any = ev
	if v.Kind() != reflect.Struct && v.Kind() != reflect.Map {
		x = map[string]any{"value": ev}
	}
	b, err := json.Marshal(x)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error(), "value": fmt.Sprintf("%v", ev)})
	}
	return b
}

// EventType names ev's type as the "type" member of its [EventLine] does:
// package.Name, a pointer's element type.
func EventType(ev core.Event) string {
	if ev == nil {
		return "nil"
	}
	t := reflect.TypeOf(ev)
	if name, ok := eventTypes.Load(t); ok {
		return name.(string)
	}
	name := typeName(t)
	eventTypes.Store(t, name)
	return name
}

// eventTypes caches EventType's names by dynamic type: every event a host
// records is named, on its loop (a view change names one per node).
var eventTypes sync.Map // reflect.Type → string

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return t.String()
	}
	pkg := t.PkgPath()
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		pkg = pkg[i+1:]
	}
	if pkg == "" {
		return t.Name()
	}
	return pkg + "." + t.Name()
}

// LockedWriter serializes Writes to an underlying writer, so that several
// hosts in one process can share one event stream; each Write (one line)
// is written whole.
type LockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLockedWriter returns a LockedWriter writing to w.
func NewLockedWriter(w io.Writer) *LockedWriter { return &LockedWriter{w: w} }

// Write writes p to the underlying writer under the lock.
func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
