// Command cohort runs cohort's demo, its simulations and experiments. See
// `cohort help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cohort-mp/cohort/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
