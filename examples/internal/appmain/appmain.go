// Package appmain is the start and end every example program shares: a
// context that ends on SIGINT/SIGTERM or after a timeout, comm.Init, and a
// bounded Finalize.
//
//	ctx, s, done, err := appmain.Start("ep", time.Hour, stderr)
//	if err != nil {
//		return 1 // already reported on stderr
//	}
//	defer done()
package appmain

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/comm"
)

// FinalizeTimeout bounds the Finalize of done: a peer that is gone must not
// keep a rank from exiting.
const FinalizeTimeout = 2 * time.Second

// Start joins the job of this process (comm.Init with opts). done
// finalizes the session and releases the context; call it before
// returning. On error, Start has written "name: error" to stderr and
// released everything.
func Start(name string, timeout time.Duration, stderr io.Writer, opts ...comm.Option) (ctx context.Context, s *comm.Session, done func(), err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	s, err = comm.Init(ctx, opts...)
	if err != nil {
		cancel()
		stop()
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, nil, nil, err
	}
	done = func() {
		fctx, fcancel := context.WithTimeout(context.Background(), FinalizeTimeout)
		defer fcancel()
		s.Finalize(fctx)
		cancel()
		stop()
	}
	return ctx, s, done, nil
}
