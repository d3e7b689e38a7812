package ca

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// CRLFile is the CA's revocation list, in the CA directory beside ca.crt:
// an X.509 CRL (PEM) signed by the CA, which the operator copies beside
// ca.crt on every machine of the cluster.
const CRLFile = "ca.crl"

// Errors of revocation.
var (
	// ErrRevoked: a peer's certificate is on the CA's revocation list.
	ErrRevoked = errors.New("ca: certificate revoked")
	// ErrCRL: a revocation list that cannot be used (unreadable, not a
	// CRL, not signed by the CA, older than the one in force).
	ErrCRL = errors.New("ca: bad revocation list")
	// ErrUnknown: a name the CA has issued no certificate to.
	ErrUnknown = errors.New("ca: no certificate issued")
)

// Revoke puts every certificate the CA in dir issued to name (see [List])
// on its revocation list, and returns their serials.
func Revoke(dir, name string) ([]*big.Int, error) {
	list, err := List(dir)
	if err != nil {
		return nil, err
	}
	var serials []*big.Int
	for _, is := range list {
		if is.Name == name {
			serials = append(serials, is.Serial)
		}
	}
	if len(serials) == 0 {
		return nil, fmt.Errorf("%w to %q (see 'cohort ca list'; revoke by serial a certificate the CA has no record of)", ErrUnknown, name)
	}
	return serials, RevokeSerial(dir, serials...)
}

// RevokeSerial puts the certificates of the given serials on the
// revocation list of the CA in dir, dir/ca.crl: the list already there
// (which must be the CA's) plus these, numbered one more, signed by the
// CA, written beside and renamed over the old one (0644). A serial
// already on the list keeps its first revocation time. Its NextUpdate is
// the CA's expiry: a list stays in force until it is replaced, and a
// cluster does not stop when nobody republishes it.
func RevokeSerial(dir string, serials ...*big.Int) error {
	caCert, caKey, err := load(dir, "ca")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, CRLFile)
	old, err := readCRL(path, []*x509.Certificate{caCert})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = &x509.RevocationList{Number: big.NewInt(0)}
	case err != nil:
		return fmt.Errorf("%v (move it away to start a new list)", err)
	}
	now := time.Now().UTC()
	entries := slices.Clone(old.RevokedCertificateEntries)
	for _, s := range serials {
		if !slices.ContainsFunc(entries, func(e x509.RevocationListEntry) bool { return e.SerialNumber.Cmp(s) == 0 }) {
			entries = append(entries, x509.RevocationListEntry{SerialNumber: s, RevocationTime: now})
		}
	}
	number := new(big.Int).Add(old.Number, big.NewInt(1))
	tmpl := &x509.RevocationList{
		RevokedCertificateEntries: entries, Number: number,
		ThisUpdate: now.Add(-time.Minute), NextUpdate: caCert.NotAfter,
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, caCert, caKey)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrCRL, err)
	}
	tmp, err := writeTemp(dir, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o644)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: %v", ErrFiles, err)
	}
	return nil
}

// RevokedSerials returns the serials on the CA's revocation list in dir
// (none when it has none yet).
func RevokedSerials(dir string) (map[string]time.Time, error) {
	caCert, _, err := load(dir, "ca")
	if err != nil {
		return nil, err
	}
	l, err := readCRL(filepath.Join(dir, CRLFile), []*x509.Certificate{caCert})
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]time.Time{}, nil
	}
	if err != nil {
		return nil, err
	}
	return serialsOf(l), nil
}

func serialsOf(l *x509.RevocationList) map[string]time.Time {
	m := make(map[string]time.Time, len(l.RevokedCertificateEntries))
	for _, e := range l.RevokedCertificateEntries {
		m[SerialText(e.SerialNumber)] = e.RevocationTime
	}
	return m
}

// readCRL reads the revocation list at path (PEM or DER) and checks that
// one of cas signed it. A missing file is an error wrapping
// fs.ErrNotExist.
func readCRL(path string, cas []*x509.Certificate) (*x509.RevocationList, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCRL, err)
	}
	if blk, _ := pem.Decode(b); blk != nil {
		if blk.Type != "X509 CRL" {
			return nil, fmt.Errorf("%w: %s holds a PEM %q, not an X509 CRL", ErrCRL, path, blk.Type)
		}
		b = blk.Bytes
	}
	l, err := x509.ParseRevocationList(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCRL, path, err)
	}
	for _, c := range cas {
		if l.CheckSignatureFrom(c) == nil {
			if l.Number == nil {
				l.Number = big.NewInt(0)
			}
			return l, nil
		}
	}
	return nil, fmt.Errorf("%w: %s is not signed by the cluster's CA (issuer %q)", ErrCRL, path, l.Issuer.CommonName)
}
