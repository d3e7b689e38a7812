package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cohort-mp/cohort/internal/livedemo"
)

// The live demo's flags (package livedemo runs it). Why build
// examples/nqueens with 'go build' rather than re-execute the cohort binary
// as a rank: the program's code is its main package and
// examples/nqueens/internal/..., which Go's internal rule keeps out of
// cmd/cohort; linking it in would mean moving the example's packages, and
// the demo would no longer show a program run the way users run theirs
// (cohort run PROGRAM). The build reuses the cache `go run ./cmd/cohort`
// has just filled: about a second.

func runLiveDemo(ctx context.Context, c *call) error {
	fs := c.newFlags()
	var cfg livedemo.Config
	fs.Bool("sim", false, "run the simulated 1,024-node gossip demo instead (see cohort demo --sim -h)")
	fs.IntVar(&cfg.N, "n", 16, "board `size`, 8 to 16 (the sizes whose count is published)")
	fs.IntVar(&cfg.Procs, "procs", 8, "number of `processes` (ranks)")
	fs.IntVar(&cfg.Kills, "kill", 2, "how many `ranks` to kill with SIGKILL (never rank 0)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "`seed` of the victims, the kill times and the ranks' steals")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "print only the result")
	fs.StringVar(&cfg.Program, "program", "", "")
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	cfg.Build = buildNQueens
	if err := cfg.Validate(); err != nil {
		return usagef("%s", strings.TrimPrefix(err.Error(), livedemo.ErrConfig.Error()+": "))
	}
	return livedemo.Run(ctx, cfg, c.stdout, c.stderr)
}

// buildNQueens builds examples/nqueens of the cohort module this command
// runs in (found from the working directory up).
func buildNQueens(ctx context.Context, stderr io.Writer) (string, func(), error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", func() {}, err
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(mod), []byte("module github.com/cohort-mp/cohort\n")) {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", func() {}, errors.New("the demo builds examples/nqueens from cohort's source: run it inside a clone (go run ./cmd/cohort demo)")
		}
		dir = parent
	}
	return buildProgram(ctx, filepath.Join(dir, "examples", "nqueens"), ".", stderr)
}
