package experiment

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress shows how many runs of a batch are done. It is only touched by
// the goroutine that collects results.
type progress interface {
	Add(n int)
	Finish()
}

type noProgress struct{}

func (noProgress) Add(int) {}
func (noProgress) Finish() {}

// newProgress returns a bar on w when w is a terminal, and nothing
// otherwise: a bar written to a file or a pipe (CI logs, `2>log`) would
// only be noise. The bar erases itself when the batch is done.
func newProgress(w io.Writer, total int, label string) progress {
	f, ok := w.(*os.File)
	if !ok || f == nil || !term.IsTerminal(int(f.Fd())) {
		return noProgress{}
	}
	return &termProgress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription(label),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
	)}
}

type termProgress struct{ bar *progressbar.ProgressBar }

func (p *termProgress) Add(n int) { _ = p.bar.Add(n) }

// Finish erases the bar, whether or not every run completed.
func (p *termProgress) Finish() { _ = p.bar.Finish() }
