package cli

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// reexecVar makes the test binary act as the cohort command when it is
// started again as a child: `cohort cluster` and `cohort bench` start the
// running executable with the argument "node".
const reexecVar = "COHORT_TEST_REEXEC"

func TestMain(m *testing.M) {
	if os.Getenv(reexecVar) == "cohort" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Setenv(reexecVar, "cohort")
	os.Exit(m.Run())
}
