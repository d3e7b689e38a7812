package cli

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is the release name; set with -ldflags "-X
// github.com/cohort-mp/cohort/internal/cli.version=v1.2.3".
var version = "devel"

func init() {
	register(&command{
		name:     "version",
		synopsis: "",
		summary:  "print the version of cohort and of Go",
		help: `Version prints cohort's version, the commit it was built from when known,
and the Go version and platform.

Example:
  cohort version`,
		run: runVersion,
	})
}

func runVersion(_ context.Context, c *call) error {
	fs := c.newFlags()
	if err := c.parse(fs, c.args, 0); err != nil {
		return err
	}
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "devel" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	fmt.Fprintf(c.stdout, "cohort %s %s %s/%s\n", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
