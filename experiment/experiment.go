package experiment

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Errors returned by the framework.
var (
	// ErrUnknown is returned by [Lookup] callers for a name that no
	// experiment is registered under.
	ErrUnknown = errors.New("experiment: unknown experiment")
	// ErrChecksFailed is returned by [Execute] when the experiment ran to
	// the end but at least one of its checks failed; the outputs and the
	// report are written all the same.
	ErrChecksFailed = errors.New("experiment: checks failed")
	// ErrBadOption reports an invalid common option (workers < 0, empty
	// output directory).
	ErrBadOption = errors.New("experiment: bad option")
)

// Experiment is one reproduction. A fresh value is made for every
// invocation (see [Spec.New]), so flag storage is never shared.
type Experiment interface {
	// Flags registers the experiment's own flags on fs (the common flags
	// are already there).
	Flags(fs *flag.FlagSet)
	// Run does the experiment: it runs its tasks with [RunAll] and writes
	// its outputs through s. It returns an error only when the experiment
	// could not be carried out (bad flag values, a run that failed, a file
	// that could not be written); a result that contradicts the paper is a
	// failed check, recorded with [Session.Check].
	Run(ctx context.Context, s *Session) error
}

// Spec describes a registered experiment.
type Spec struct {
	// Name is the command-line name (`cohort sim <Name>`).
	Name string
	// Summary is one line for listings.
	Summary string
	// New returns a fresh experiment.
	New func() Experiment
}

var (
	registryMu sync.Mutex
	registry   = map[string]Spec{}
)

// Register makes an experiment available by name. It is meant to be called
// from init functions and panics on a duplicate or empty name, which is a
// programming error.
func Register(s Spec) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s.Name == "" || s.New == nil {
		panic("experiment: Register needs a name and a constructor")
	}
	if _, dup := registry[s.Name]; dup {
		panic("experiment: duplicate experiment " + s.Name)
	}
	registry[s.Name] = s
}

// Lookup returns the experiment registered under name.
func Lookup(name string) (Spec, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	s, ok := registry[name]
	return s, ok
}

// List returns every registered experiment, sorted by name.
func List() []Spec {
	registryMu.Lock()
	defer registryMu.Unlock()
	out := make([]Spec, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Options are the flags every experiment has.
type Options struct {
	// Seed is the experiment's seed; every run's seed derives from it and
	// the run's key.
	Seed uint64
	// Out is the output directory; empty means out/<name>.
	Out string
	// Quick asks for a smaller sweep (fewer sizes, fewer seeds or trials),
	// for a look in seconds rather than minutes.
	Quick bool
	// Workers is the number of runs executed at once; 0 means GOMAXPROCS.
	// It never changes the results.
	Workers int
	// Progress receives the progress bar; a bar is drawn only when it is a
	// terminal. Nil means no bar.
	Progress io.Writer
	// Log receives short human-readable lines (what is being run, where the
	// outputs went). Nil discards them.
	Log io.Writer
	// Command is the command line that reproduces the run, quoted in the
	// report. Empty means one is built from the options.
	Command string
}

// DefaultSeed is the seed used when none is given.
const DefaultSeed = 1

// Bind registers the common flags on fs, writing into o.
func (o *Options) Bind(fs *flag.FlagSet, name string) {
	fs.Uint64Var(&o.Seed, "seed", DefaultSeed, "experiment `seed`: the same seed gives the same results")
	fs.StringVar(&o.Out, "out", filepath.Join("out", name), "output `directory` for CSV, plots and report.md")
	fs.BoolVar(&o.Quick, "quick", false, "run a smaller sweep (seconds instead of minutes)")
	fs.IntVar(&o.Workers, "workers", runtime.GOMAXPROCS(0), "`number` of runs executed in parallel (does not change results)")
}

// Execute runs e (made by spec.New, its flags already parsed) with the
// options: it creates the output directory, calls e.Run, and writes
// report.md. It returns [ErrChecksFailed] (wrapped) when a check failed,
// after writing everything.
func Execute(ctx context.Context, spec Spec, e Experiment, opts Options) (*Session, error) {
	name := spec.Name
	s, err := NewSession(name, opts)
	if err != nil {
		return nil, err
	}
	s.SetSummary(spec.Summary)
	quick := ""
	if s.opts.Quick {
		quick = ", quick"
	}
	s.logf("%s: seed %d%s, %d workers, writing to %s", name, s.opts.Seed, quick, s.Workers(), s.opts.Out)
	if err := e.Run(ctx, s); err != nil {
		return s, err
	}
	return s, s.Finish()
}

// Session is the state of one experiment invocation: its options, its
// output directory and the report being built. Its methods are meant to be
// called from the goroutine running Experiment.Run (not from tasks).
type Session struct {
	name   string
	opts   Options
	report report
}

// NewSession prepares an invocation of experiment name: it validates the
// options and creates the output directory.
func NewSession(name string, opts Options) (*Session, error) {
	if opts.Workers < 0 {
		return nil, fmt.Errorf("%w: --workers %d is negative", ErrBadOption, opts.Workers)
	}
	if opts.Workers == 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	if opts.Out == "" {
		opts.Out = filepath.Join("out", name)
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Command == "" {
		opts.Command = fmt.Sprintf("cohort sim %s --seed %d", name, opts.Seed)
		if opts.Quick {
			opts.Command += " --quick"
		}
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("experiment: output directory: %w", err)
	}
	return &Session{name: name, opts: opts}, nil
}

// Name is the experiment's name.
func (s *Session) Name() string { return s.name }

// Seed is the experiment's seed.
func (s *Session) Seed() uint64 { return s.opts.Seed }

// Quick reports whether the smaller sweep was asked for.
func (s *Session) Quick() bool { return s.opts.Quick }

// Workers is the number of runs executed at once.
func (s *Session) Workers() int { return s.opts.Workers }

// Dir is the output directory.
func (s *Session) Dir() string { return s.opts.Out }

// Path returns the path of file inside the output directory.
func (s *Session) Path(file string) string { return filepath.Join(s.opts.Out, file) }

// Logf writes one human-readable line to the session's log.
func (s *Session) Logf(format string, args ...any) { s.logf(format, args...) }

func (s *Session) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	if !strings.HasSuffix(line, "\n") {
		line += "\n"
	}
	io.WriteString(s.opts.Log, line)
}
