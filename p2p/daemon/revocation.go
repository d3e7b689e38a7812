package daemon

import (
	"log/slog"
	"net/http"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// watchRevocations makes creds refuse peers on the CA's revocation list,
// cfg.CRL (see Config.CRL): the TLS configurations made from creds
// afterwards, the server's and those of the clients to supernodes and
// peers, check it in each handshake.
func watchRevocations(creds *ca.Credentials, cfg Config, log *slog.Logger) error {
	return creds.WatchRevocations(expand(cfg.CRL), log.With("daemon", cfg.Name))
}

// revocationGate refuses, with 403, a request whose client was revoked
// after its connection's handshake (which refuses one revoked before), so
// that a kept-alive connection does not outlive its peer's revocation.
func (d *Daemon) revocationGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			if err := d.creds.CheckRevoked(*r.TLS); err != nil {
				d.refuse(w, r, http.StatusForbidden, "request", err)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
