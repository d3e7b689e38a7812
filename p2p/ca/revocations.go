package ca

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// revocations is the CA's revocation list as a member holds it: read
// from its file at start and read again when the file changes. The file
// is looked at (one stat) on every check, that is on every handshake and
// request: a list copied onto a machine is in force from the next
// connection, with no timer and no goroutine.
type revocations struct {
	path string
	cas  []*x509.Certificate
	log  *slog.Logger

	mu sync.Mutex
	// seen is the file as last looked at (nil: absent), read or refused:
	// a file that does not change is neither read nor logged again.
	seen    os.FileInfo
	number  *big.Int
	revoked map[string]time.Time // by SerialText
}

// WatchRevocations makes the credentials refuse any peer whose
// certificate is on the CA's revocation list at path: the TLS
// configurations made afterwards check the peer in the handshake (on
// both the server's and the client's side), and CheckRevoked checks an
// established connection. With path "", the list is ca.crl beside the CA
// certificate given to Load, and it may be absent (it is read when it
// appears); a path given must exist. A list that cannot be read or is not
// signed by the CA is an error wrapping ErrCRL. Later, when the file
// changes, it is read again; a new list that is bad, older (by CRL
// number) or removed is logged and the last good one stays in force.
//
// Call it once, before making TLS configurations and before the
// credentials are shared between goroutines.
func (c *Credentials) WatchRevocations(path string, log *slog.Logger) error {
	optional := path == ""
	if optional {
		path = filepath.Join(filepath.Dir(c.caFile), CRLFile)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &revocations{path: path, cas: c.cas, log: log, number: big.NewInt(-1), revoked: map[string]time.Time{}}
	st, err := os.Stat(path)
	switch {
	case optional && errors.Is(err, fs.ErrNotExist):
		log.Info("ca: no revocation list yet: it is read when it appears", "crl", path)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrCRL, err)
	default:
		l, err := readCRL(path, c.cas)
		if err != nil {
			return err
		}
		r.seen, r.number, r.revoked = st, l.Number, serialsOf(l)
		log.Info("ca: revocation list in force", "crl", path, "number", l.Number.String(), "revoked", len(r.revoked))
	}
	c.rev = r
	return nil
}

// CheckRevoked returns an error wrapping ErrRevoked, naming the peer and
// its serial, if the peer's certificate of the connection state cs is on
// the revocation list (nil without a list: see WatchRevocations). A
// server checks it on each request of a kept-alive connection, to cut
// off a peer revoked after its handshake.
func (c *Credentials) CheckRevoked(cs tls.ConnectionState) error {
	if c.rev == nil {
		return nil
	}
	return c.rev.check(cs)
}

func (r *revocations) check(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	leaf := cs.PeerCertificates[0]
	r.refresh()
	r.mu.Lock()
	at, revoked := r.revoked[SerialText(leaf.SerialNumber)]
	r.mu.Unlock()
	if revoked {
		return fmt.Errorf("%w: %q (serial %s, revoked %s)", ErrRevoked, leaf.Subject.CommonName,
			SerialText(leaf.SerialNumber), at.UTC().Format(time.RFC3339))
	}
	return nil
}

// refresh reads the list again if its file changed since last seen.
func (r *revocations) refresh() {
	st, err := os.Stat(r.path)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.seen != nil {
			r.log.Warn("ca: revocation list gone: the last one read stays in force", "crl", r.path, "err", err)
			r.seen = nil
		}
		return
	}
	if r.seen != nil && os.SameFile(r.seen, st) && r.seen.ModTime().Equal(st.ModTime()) && r.seen.Size() == st.Size() {
		return
	}
	r.seen = st
	l, err := readCRL(r.path, r.cas)
	switch {
	case err != nil:
		r.log.Error("ca: new revocation list refused: the last good one stays in force", "crl", r.path, "err", err)
	case l.Number.Cmp(r.number) < 0:
		r.log.Error("ca: new revocation list refused: the last good one stays in force", "crl", r.path,
			"err", fmt.Sprintf("its number %v is older than %v", l.Number, r.number))
	default:
		r.number, r.revoked = l.Number, serialsOf(l)
		r.log.Info("ca: revocation list read", "crl", r.path, "number", l.Number.String(), "revoked", len(r.revoked))
	}
}
