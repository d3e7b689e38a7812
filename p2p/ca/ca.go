// Package ca is the cluster's certificate authority for the peer-to-peer
// middleware: supernodes, peer daemons and submitters speak mutual TLS with
// certificates issued by one CA, and a daemon accepts a job only from a
// submitter whose certificate chains to that CA and whose name (the
// certificate's common name) its configuration allows.
//
// Files: a CA is a directory holding ca.crt (PEM, public) and ca.key (PEM,
// 0600); Issue writes NAME.crt and NAME.key (0600) for a member, and
// records the certificate in the CA's index, issued.txt. Every file is
// created anew (O_EXCL), or, on renewal, written beside and renamed over
// the old one: nothing existing at its path, a file of looser mode or a
// symbolic link, is ever written through. Keys are ECDSA P-256;
// certificates carry the name as common name and as a DNS name (and as an
// IP address when it is one), for client and server use.
//
// Lifetimes: the CA's certificate lives ten years; a member's 90 days
// (MemberValidity) unless IssueFor is given another lifetime (at most
// three years). A certificate past its NotAfter is refused by every
// handshake's standard verification, so a member that is not renewed
// ([Renew], which writes a new key and certificate over the old files)
// drops out on its own; a daemon or supernode reads its own certificate at
// start, and is restarted to use a renewed one.
//
// Revocation: to stop trusting a member before its certificate expires,
// the CA puts its serials on its revocation list ([Revoke] by name,
// [RevokeSerial] by serial): ca.crl beside ca.crt, an X.509 CRL signed by
// the CA. The operator copies ca.crl to every machine, beside its ca.crt.
// A member that calls [Credentials.WatchRevocations] (daemons and
// supernodes do) reads the list at start, refusing to start on one that
// is unreadable or not signed by its CA, and looks at the file again on
// every handshake: a new list is in force from the next connection. From
// then on, a peer whose certificate is on it is refused in the TLS
// handshake, whether it dials or is dialled, with an error naming it and
// its serial; a server also checks each request of a kept-alive
// connection ([Credentials.CheckRevoked]). A new list that is bad, older
// or removed is logged and the last good one stays in force.
package ca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"
)

// Errors of the package.
var (
	// ErrExists: Init or Issue would overwrite files.
	ErrExists = errors.New("ca: already exists")
	// ErrBadName: a name that is not a host name, an address or a user
	// name made of letters, digits, '.', '-' and '_'.
	ErrBadName = errors.New("ca: bad name")
	// ErrNotAllowed: a peer's certificate is valid but its name is not
	// in the allowed list.
	ErrNotAllowed = errors.New("ca: name not allowed")
	// ErrFiles: a CA directory or credential file that cannot be used
	// (missing, unreadable, bad PEM, a key readable by others).
	ErrFiles = errors.New("ca: bad files")
	// ErrValidity: a lifetime out of range, or a CA that has expired.
	ErrValidity = errors.New("ca: bad lifetime")
)

// Lifetimes of what Init and Issue make. A member's certificate is short
// lived so that a lost key or a departed member stops being trusted on its
// own, revoked or not; it is renewed before it expires ([Renew]).
const (
	CAValidity     = 10 * 365 * 24 * time.Hour
	MemberValidity = 90 * 24 * time.Hour
	// MaxMemberValidity bounds what IssueFor and Renew accept.
	MaxMemberValidity = 3 * 365 * 24 * time.Hour
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,62}$`)

// Init creates a CA in dir (created 0700 if missing): ca.crt and ca.key
// (0600). It refuses to overwrite an existing CA.
func Init(dir, name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w: %q", ErrBadName, name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%w: %v", ErrFiles, err)
	}
	for _, f := range []string{"ca.crt", "ca.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return fmt.Errorf("%w: %s", ErrExists, filepath.Join(dir, f))
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"cohort"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(CAValidity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	return writePair(dir, "ca", der, key)
}

// Issue writes NAME.crt and NAME.key (0600) into out, signed by the CA in
// dir, for name (a daemon's host name or address, or a submitter's user
// name), valid for MemberValidity. It refuses to overwrite.
func Issue(dir, out, name string) error {
	_, err := IssueFor(dir, out, name, MemberValidity)
	return err
}

// IssueFor is Issue with a lifetime of validity (at most
// MaxMemberValidity, and cut to the CA's own expiry); it returns the
// certificate, whose NotAfter says when it expires. The certificate is
// recorded in the CA's index (see [List]).
func IssueFor(dir, out, name string, validity time.Duration) (*x509.Certificate, error) {
	for _, f := range []string{name + ".crt", name + ".key"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			return nil, fmt.Errorf("%w: %s (renew it, or remove it)", ErrExists, filepath.Join(out, f))
		}
	}
	cert, key, err := sign(dir, name, validity)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFiles, err)
	}
	if err := writePair(out, name, cert.Raw, key); err != nil {
		return nil, err
	}
	return cert, nil
}

// sign makes a new key and a certificate for it, signed by the CA in dir,
// and records the certificate in the CA's index before anything is
// written out: a certificate that leaves the CA is always in the index.
func sign(dir, name string, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if !nameRE.MatchString(name) {
		return nil, nil, fmt.Errorf("%w: %q (letters, digits, '.', '-', '_'; at most 63)", ErrBadName, name)
	}
	if validity <= 0 || validity > MaxMemberValidity {
		return nil, nil, fmt.Errorf("%w: %v (want more than 0 and at most %v)", ErrValidity, validity, MaxMemberValidity)
	}
	caCert, caKey, err := load(dir, "ca")
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(caCert.NotAfter) {
		notAfter = caCert.NotAfter // past it, the chain would not verify anyway
	}
	if !notAfter.After(now) {
		return nil, nil, fmt.Errorf("%w: the CA's own certificate expired at %s", ErrValidity, caCert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name, Organization: []string{"cohort"}},
		NotBefore: now.Add(-time.Hour), NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{name},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := record(dir, cert); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// writePair writes base.key (0600) and base.crt (0644) into dir. Each file
// is created with O_EXCL: a file or symbolic link planted at either path
// after the caller's existence check makes it fail rather than be written
// through, and an existing file's looser mode is never kept.
func writePair(dir, base string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	keyPath, crtPath := filepath.Join(dir, base+".key"), filepath.Join(dir, base+".crt")
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	if err := writeNew(crtPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		os.Remove(keyPath)
		return err
	}
	return nil
}

// writeNew creates path with mode and writes data into it; it refuses
// (ErrExists) if anything, a symbolic link included, is already there.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%w: %s", ErrExists, path)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFiles, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("%w: %v", ErrFiles, err)
	}
	return nil
}

// load reads base.crt and base.key from dir; the key must not be readable
// by group or others.
func load(dir, base string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	crtPath, keyPath := filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	cb, err := os.ReadFile(crtPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrFiles, err)
	}
	st, err := os.Stat(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrFiles, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, nil, fmt.Errorf("%w: %s is readable by others (mode %v): chmod 600 it", ErrFiles, keyPath, st.Mode().Perm())
	}
	kb, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrFiles, err)
	}
	cblk, _ := pem.Decode(cb)
	kblk, _ := pem.Decode(kb)
	if cblk == nil || cblk.Type != "CERTIFICATE" || kblk == nil {
		return nil, nil, fmt.Errorf("%w: %s or %s is not PEM", ErrFiles, crtPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cblk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrFiles, crtPath, err)
	}
	key, err := x509.ParseECPrivateKey(kblk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrFiles, keyPath, err)
	}
	return cert, key, nil
}

// Credentials are what a member needs for mutual TLS: the CA's pool and
// its own certificate.
type Credentials struct {
	Pool *x509.CertPool
	Cert tls.Certificate
	Name string

	caFile string
	cas    []*x509.Certificate // the certificates of caFile, that sign the revocation list
	rev    *revocations        // nil: no revocation list (see WatchRevocations)
}

// Load reads the CA certificate from caFile and the member's NAME.crt and
// NAME.key from dir.
func Load(caFile, dir, name string) (*Credentials, error) {
	pb, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFiles, err)
	}
	pool := x509.NewCertPool()
	var cas []*x509.Certificate
	for rest := pb; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFiles, caFile, err)
		}
		pool.AddCert(c)
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrFiles, caFile)
	}
	cert, key, err := load(dir, name)
	if err != nil {
		return nil, err
	}
	return &Credentials{Pool: pool, Cert: tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert}, Name: name,
		caFile: caFile, cas: cas}, nil
}

// ServerConfig is the TLS configuration of a daemon or supernode: TLS 1.3,
// its own certificate, and clients required to present a certificate of
// the CA, not revoked (see WatchRevocations; the handshake fails with an
// error wrapping ErrRevoked). allowed, if not nil, also requires the
// client's name to be in it (the handshake then fails with an error
// wrapping ErrNotAllowed).
func (c *Credentials) ServerConfig(allowed []string) *tls.Config {
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Cert},
		ClientCAs:    c.Pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}
	if rev := c.rev; rev != nil {
		cfg.VerifyConnection = rev.check
	}
	if allowed != nil {
		allowed = slices.Clone(allowed)
		cfg.VerifyPeerCertificate = func(_ [][]byte, chains [][]*x509.Certificate) error {
			if len(chains) == 0 || len(chains[0]) == 0 {
				return fmt.Errorf("%w: no verified certificate", ErrNotAllowed)
			}
			name := chains[0][0].Subject.CommonName
			if !slices.Contains(allowed, name) {
				return fmt.Errorf("%w: %q", ErrNotAllowed, name)
			}
			return nil
		}
	}
	return cfg
}

// ClientConfig is the TLS configuration to reach the server named server
// (its certificate's name, not revoked: see WatchRevocations): TLS 1.3,
// the CA's pool, and this member's certificate for the server to check.
func (c *Credentials) ClientConfig(server string) *tls.Config {
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Cert},
		RootCAs:      c.Pool,
		ServerName:   server,
	}
	if rev := c.rev; rev != nil {
		cfg.VerifyConnection = rev.check
	}
	return cfg
}

// PeerName returns the verified common name of the peer of a TLS
// connection whose handshake is done ("" if none).
func PeerName(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return cs.VerifiedChains[0][0].Subject.CommonName
}
