package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineWatch is an io.Writer that closes seen once it has been written a
// line containing want.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// A supernode says each event once, on standard error: plain text by
// default, JSON with --log-format json.
func TestSupernodeLogsEachEventOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	if code, out, errs := run(t, "ca", "init", "--dir", dir); code != exitOK {
		t.Fatalf("init: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := run(t, "ca", "issue", "--dir", dir, "sn1"); code != exitOK {
		t.Fatalf("issue: exit %d\n%s%s", code, out, errs)
	}
	for _, format := range []string{"", "json"} {
		args := []string{"supernode", "--name", "sn1", "--listen", "127.0.0.1:0", "--ca", filepath.Join(dir, "ca.crt"), "--certs", dir}
		if format != "" {
			args = append(args, "--log-format", format)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var stdout bytes.Buffer
		stderr := &lineWatch{want: "supernode: serving", seen: make(chan struct{})}
		done := make(chan int)
		go func() { done <- Run(ctx, args, &stdout, stderr) }()
		select {
		case <-stderr.seen:
		case <-time.After(30 * time.Second):
			t.Fatalf("%v: no serving line; stderr:\n%s", args, stderr)
		}
		cancel()
		<-done
		out, errs := stdout.String(), stderr.String()
		if n := strings.Count(out+errs, "serving"); n != 1 {
			t.Errorf("%v: %d lines say it serves, want 1\nstdout:\n%s\nstderr:\n%s", args, n, out, errs)
		}
		for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
			isJSON := json.Valid([]byte(line))
			if isJSON != (format == "json") || format == "" && !strings.Contains(line, "level=INFO") {
				t.Errorf("%v: log line %q is not in the %q format", args, line, format)
			}
		}
	}
	code, _, stderr := run(t, "supernode", "--name", "sn1", "--log-format", "xml")
	if code != exitUsage || !strings.Contains(stderr, `--log-format "xml": want text or json`) {
		t.Errorf("--log-format xml: exit %d, stderr %q", code, stderr)
	}
}
