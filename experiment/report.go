package experiment

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Check is one verdict of an experiment: a property of the results that the
// paper (or the theory) says must hold.
type Check struct {
	// Name says what is checked, e.g. "BRR detection times inside
	// fd.DetectionBound".
	Name string
	// Passed is the verdict.
	Passed bool
	// Detail gives the figures behind the verdict.
	Detail string
}

// report is the markdown report being built: a title, the checks, and the
// body blocks in the order they were added.
type report struct {
	summary string
	checks  []Check
	blocks  []string
}

// SetSummary sets the one-line summary printed under the report's title.
func (s *Session) SetSummary(summary string) { s.report.summary = summary }

// Text adds a markdown paragraph (or heading, or list) to the report.
func (s *Session) Text(format string, args ...any) {
	s.report.blocks = append(s.report.blocks, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

// Table adds a markdown table to the report.
func (s *Session) Table(header []string, rows [][]string) {
	var b strings.Builder
	row := func(cells []string) {
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + strings.ReplaceAll(c, "|", `\|`) + " |")
		}
		b.WriteString("\n")
	}
	row(header)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = "---"
	}
	row(sep)
	for _, r := range rows {
		row(r)
	}
	s.report.blocks = append(s.report.blocks, strings.TrimRight(b.String(), "\n"))
}

// Figure saves f as PNG and SVG in the output directory and adds it to the
// report beside paper, a description of the corresponding figure of the
// paper (what it shows and the values its text gives). Points that could
// not be drawn are listed under the figure.
func (s *Session) Figure(f Figure, paper string) error {
	if err := f.Save(s.Path(f.Name)); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", f.Title)
	b.WriteString("| this run | the paper |\n|---|---|\n")
	fmt.Fprintf(&b, "| ![%s](%s.png) | %s |\n", f.Title, f.Name, strings.ReplaceAll(strings.TrimSpace(paper), "\n", " "))
	fmt.Fprintf(&b, "\nFiles: [%[1]s.png](%[1]s.png), [%[1]s.svg](%[1]s.svg).", f.Name)
	if d := f.Dropped(); len(d) > 0 {
		fmt.Fprintf(&b, " Not drawn (not positive on a log axis): %s.", strings.Join(d, "; "))
	}
	s.report.blocks = append(s.report.blocks, b.String())
	s.logf("  figure %s.png, %s.svg", s.Path(f.Name), s.Path(f.Name))
	return nil
}

// Check records a verdict for the report.
func (s *Session) Check(name string, passed bool, detail string) {
	s.report.checks = append(s.report.checks, Check{Name: name, Passed: passed, Detail: detail})
	mark := "PASS"
	if !passed {
		mark = "FAIL"
	}
	s.logf("  %s  %s: %s", mark, name, detail)
}

// Checks returns the verdicts recorded so far.
func (s *Session) Checks() []Check { return append([]Check(nil), s.report.checks...) }

// WriteCSV writes a CSV file (header first) to the output directory.
func (s *Session) WriteCSV(file string, header []string, rows [][]string) error {
	path := s.Path(file)
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	w := csv.NewWriter(f)
	w.Write(header)
	w.WriteAll(rows) // flushes
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("experiment: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("experiment: writing %s: %w", path, err)
	}
	s.logf("  data   %s (%d rows)", path, len(rows))
	return nil
}

// Finish writes report.md and returns [ErrChecksFailed] (wrapped, with the
// count) if a check failed.
func (s *Session) Finish() error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", s.name)
	if s.report.summary != "" {
		fmt.Fprintf(&b, "%s\n\n", s.report.summary)
	}
	fmt.Fprintf(&b, "Reproduce with `%s`. The results depend only on the seed, not on the number of workers.\n\n", s.opts.Command)
	failed := 0
	if len(s.report.checks) > 0 {
		b.WriteString("## Checks\n\n| verdict | check | detail |\n|---|---|---|\n")
		for _, c := range s.report.checks {
			v := "PASS"
			if !c.Passed {
				v = "**FAIL**"
				failed++
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", v, strings.ReplaceAll(c.Name, "|", `\|`), strings.ReplaceAll(c.Detail, "|", `\|`))
		}
		fmt.Fprintf(&b, "\n%d of %d checks passed.\n\n", len(s.report.checks)-failed, len(s.report.checks))
	}
	if len(s.report.blocks) > 0 {
		b.WriteString("## Results\n\n")
		for _, blk := range s.report.blocks {
			b.WriteString(blk)
			b.WriteString("\n\n")
		}
	}
	path := s.Path("report.md")
	if err := os.WriteFile(path, []byte(strings.TrimRight(b.String(), "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	s.logf("%s: %d of %d checks passed; report %s", s.name, len(s.report.checks)-failed, len(s.report.checks), abs)
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d", ErrChecksFailed, failed, len(s.report.checks))
	}
	return nil
}

// F formats a float for CSV files and tables: the shortest representation
// that reads back to the same value.
func F(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// Fp formats a float with prec significant digits, for the report.
func Fp(x float64, prec int) string { return strconv.FormatFloat(x, 'g', prec, 64) }
