package launch

import (
	"bytes"
	"io"
	"sync"
)

// maxLine is the longest line a lineWriter holds back waiting for its
// newline; a longer one is cut there (and each piece ends with a newline
// when lines are prefixed).
const maxLine = 64 << 10

// lineWriter forwards one rank's output stream line by line: each
// complete line is written to w in one Write under mu, which every
// stream of the job shares, so lines of different ranks never
// interleave. With a prefix, each line starts with it ("[3] ").
type lineWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte
	// dedup, if not nil, is shared by the replicas of one rank (under
	// mu): a line is written only by the first replica to reach it.
	dedup *dedup
	lines int // lines emitted by this stream
}

// dedup counts the lines written of one rank's stream.
type dedup struct{ written int }

func (l *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxLine - len(l.buf)
			if len(p) < room {
				l.buf = append(l.buf, p...)
				break
			}
			l.buf = append(l.buf, p[:room]...)
			p = p[room:]
			l.emit(true)
			continue
		}
		l.buf = append(l.buf, p[:i+1]...)
		p = p[i+1:]
		l.emit(false)
	}
	return n, nil
}

// emit writes the buffered line; cut says it has no newline of its own.
// Write errors are dropped: a closed terminal must not stop the job.
func (l *lineWriter) emit(cut bool) {
	if len(l.buf) == 0 {
		return
	}
	var line []byte
	if len(l.prefix) > 0 {
		line = make([]byte, 0, len(l.prefix)+len(l.buf)+1)
		line = append(append(line, l.prefix...), l.buf...)
		if cut {
			line = append(line, '\n')
		}
	} else {
		line = l.buf
	}
	l.mu.Lock()
	l.lines++
	if l.dedup == nil || l.lines > l.dedup.written {
		if l.dedup != nil {
			l.dedup.written = l.lines
		}
		l.w.Write(line)
	}
	l.mu.Unlock()
	l.buf = l.buf[:0]
}

// flush writes a last line that had no newline (called once the stream
// has ended).
func (l *lineWriter) flush() {
	l.emit(len(l.prefix) > 0)
}
