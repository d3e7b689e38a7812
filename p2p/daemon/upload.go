package daemon

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// errUploadCut: the job was stopped while one of its files arrived.
var errUploadCut = errors.New("the job was stopped while the file arrived")

// uploadBody is a staged file's request body. Each read may wait at most
// idle for the sender (the server's read timeout would bound the whole
// body, too short for a large file on a slow link, too long for a stalled
// one); cut ends the upload at once, from any goroutine.
type uploadBody struct {
	r    io.Reader
	rc   *http.ResponseController
	idle time.Duration

	mu  sync.Mutex
	end bool
}

func newUploadBody(r io.Reader, rc *http.ResponseController, idle time.Duration) *uploadBody {
	return &uploadBody{r: r, rc: rc, idle: idle}
}

func (b *uploadBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.end {
		b.mu.Unlock()
		return 0, errUploadCut
	}
	b.rc.SetReadDeadline(time.Now().Add(b.idle))
	b.mu.Unlock()
	return b.r.Read(p)
}

// finish refuses every later read and leaves the deadline alone: called
// before the handler returns, after which the response controller must
// not be used.
func (b *uploadBody) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.end = true
}

// cut makes the pending read fail and every later one refused.
func (b *uploadBody) cut() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.end {
		b.end = true
		b.rc.SetReadDeadline(time.Now())
	}
}
