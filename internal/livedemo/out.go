package livedemo

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ANSI styles of the live demo; they combine by concatenation.
const (
	bold   = "\x1b[1m"
	dim    = "\x1b[2m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
	cyan   = "\x1b[36m"
	reset  = "\x1b[0m"
)

// liveOut prints the live demo: one line per event, aligned, in colour and
// with a status line redrawn in place only when stdout is a terminal.
type liveOut struct {
	w        io.Writer
	tty      bool
	quiet    bool
	statusOn bool // a status line is on screen
	spin     int
}

func newLiveOut(w io.Writer, quiet bool) *liveOut {
	return &liveOut{w: w, tty: isTerminal(w), quiet: quiet}
}

// isTerminal reports whether w is a terminal that takes colours (NO_COLOR
// and TERM=dumb turn them off).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (o *liveOut) paint(style, s string) string {
	if !o.tty || style == "" {
		return s
	}
	return style + s + reset
}

// plain prints one line as it is.
func (o *liveOut) plain(s string) {
	if o.quiet {
		return
	}
	o.clear()
	fmt.Fprintln(o.w, s)
}

func (o *liveOut) blank() { o.plain("") }

func (o *liveOut) header(s string) { o.plain(o.paint(bold, s)) }

// line prints a row of the event table: time, who, a symbol and the text.
func (o *liveOut) line(at, who, sym, text, style string) {
	if at == "" && who == "" && sym == "" {
		o.plain(o.paint(style, "  "+text))
		return
	}
	o.plain(fmt.Sprintf("  %9s  %s %s %s", at, o.paint(bold, pad(who, 4)), o.paint(style, sym), o.paint(style, text)))
}

// event prints what happened at (after the job's start).
func (o *liveOut) event(at time.Duration, who, sym, text, style string) {
	o.line(fmt.Sprintf("%+.3fs", at.Seconds()), who, sym, text, style)
}

// legendLines explain the event table's symbols and terms, once, before
// it: a reader meets them in the first lines.
var legendLines = []string{
	"✗ killed   ? suspected   ✓ no longer suspected   ● declared failed   ↺ work taken back from a dead rank   ★ the count   · other output",
	"◆ a view once every live member installed it; \"epoch 2.n0\" is view number 2, proposed by its root n0;",
	"  \"T_s\" is the stabilization time, from the root's first failure report to the view all agreed on",
}

// legend prints the legend of the event table.
func (o *liveOut) legend() {
	for _, l := range legendLines {
		o.line("", "", "", l, dim)
	}
	o.blank()
}

// status shows a transient progress line (on a terminal only).
func (o *liveOut) status(s string) {
	if o.quiet || !o.tty {
		return
	}
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	o.spin++
	fmt.Fprintf(o.w, "\r\x1b[K  %s %s", o.paint(cyan, frames[o.spin%len(frames)]), o.paint(dim, s))
	o.statusOn = true
}

// clear removes the status line.
func (o *liveOut) clear() {
	if o.statusOn {
		fmt.Fprint(o.w, "\r\x1b[K")
		o.statusOn = false
	}
}

// pad pads s with spaces to n runes.
func pad(s string, n int) string {
	if k := utf8.RuneCountInString(s); k < n {
		return s + strings.Repeat(" ", n-k)
	}
	return s
}

// commas renders n with thousands separators: 14772512 → "14,772,512".
func commas(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
