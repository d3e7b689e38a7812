package supernode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// Config configures a running supernode.
type Config struct {
	// Listen is the TCP address to serve on.
	Listen string
	// Creds are the supernode's credentials (its certificate and the
	// cluster's CA).
	Creds *ca.Credentials
	// Expiry is how long a registration lives without renewal (0: 30 s).
	Expiry time.Duration
	// Logger receives the JSON logs; nil discards them.
	Logger *slog.Logger
	// Ready, if not nil, receives the address served on once listening.
	Ready func(addr string)
}

// Serve runs a supernode until ctx is done, then shuts down gracefully
// (requests in flight finish, within 5 s).
func Serve(ctx context.Context, cfg Config) error {
	if cfg.Creds == nil {
		return errors.New("supernode: no credentials")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("supernode: %w", err)
	}
	srv := &http.Server{
		Handler:           Handler(NewRegistry(cfg.Expiry, nil), log),
		TLSConfig:         cfg.Creds.ServerConfig(nil),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn), // refused handshakes, with their reason
	}
	log.Info("supernode: serving", "addr", ln.Addr().String())
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	log.Info("supernode: shutting down")
	return srv.Shutdown(sctx)
}
