package runner

import (
	"bytes"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/internal/record"
)

// How a [Job] reads its nodes' event files: polled, never a pipe, so that
// a slow orchestrator can never block a node's loop.

// Tailing: the poll interval starts at tailMin after new lines and doubles
// up to tailMax while the files stay quiet.
const (
	tailMin = 5 * time.Millisecond
	tailMax = 40 * time.Millisecond
)

// tailLoop reads the nodes' event files until Close.
func (j *Job) tailLoop() {
	defer close(j.tailDone)
	wait := tailMin
	tm := time.NewTimer(wait)
	defer tm.Stop()
	for {
		select {
		case <-tm.C:
		case <-j.stopTail:
			return
		}
		j.mu.Lock()
		tails := make([]*tailer, 0, len(j.procs))
		for _, p := range j.procs {
			tails = append(tails, p.tail)
		}
		j.mu.Unlock()
		got := false
		for _, t := range tails {
			got = t.drain(j, false) || got
		}
		if got {
			wait = tailMin
		} else {
			wait = min(2*wait, tailMax)
		}
		tm.Reset(wait)
	}
}

// tailer reads one node's event file as it grows.
type tailer struct {
	mu      sync.Mutex
	id      core.NodeID
	f       *os.File // nil once finished
	partial []byte   // the start of a line not yet complete
	buf     []byte
}

// drain reads what the node has written since the last call and adds a
// record per complete line; final closes the file (the node has exited).
// It reports whether there was anything new.
func (t *tailer) drain(j *Job, final bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil {
		return false
	}
	if t.buf == nil {
		t.buf = make([]byte, 64<<10)
	}
	got := false
	for {
		n, err := t.f.Read(t.buf)
		if n > 0 {
			got = true
			data := append(t.partial, t.buf[:n]...)
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				j.add(decodeLine(t.id, data[:i+1]))
				data = data[i+1:]
			}
			t.partial = append(t.partial[:0], data...)
		}
		if err != nil || n == 0 {
			break
		}
	}
	if final {
		if len(bytes.TrimSpace(t.partial)) > 0 {
			j.add(decodeLine(t.id, t.partial)) // a last line without its newline
		}
		t.f.Close()
		t.f = nil
	}
	return got
}

func decodeLine(id core.NodeID, line []byte) record.Record {
	rec, err := record.DecodeRecord(line)
	if err != nil {
		return record.Record{Node: id, Time: time.Now(), Type: "invalid", Event: string(bytes.TrimSpace(line))}
	}
	return rec
}

// readTail returns the last 16 KiB of a file ("" if it cannot be read).
func readTail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 16 << 10
	if st, err := f.Stat(); err == nil && st.Size() > max {
		f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
