package ca

import (
	"bufio"
	"cmp"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// IndexFile is the CA's record of the certificates it issued, in the CA
// directory: a line "SERIAL NOT-AFTER NAME" per certificate (serial in
// hexadecimal, expiry in RFC 3339), appended by every issue and renewal.
// It lets the CA revoke a member by name wherever its files were written.
const IndexFile = "issued.txt"

// Issued is a certificate the CA issued.
type Issued struct {
	Name     string
	Serial   *big.Int
	NotAfter time.Time
	// Revoked is when the certificate was put on the CA's revocation
	// list (zero: it is not).
	Revoked time.Time
}

// SerialText is how serials are written and read: lowercase hexadecimal.
func SerialText(n *big.Int) string { return n.Text(16) }

// ParseSerial reads a serial written by SerialText; colons between
// byte pairs, as openssl prints them, are allowed.
func ParseSerial(s string) (*big.Int, error) {
	n, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimPrefix(strings.ToLower(s), "0x"), ":", ""), 16)
	if !ok || n.Sign() <= 0 {
		return nil, fmt.Errorf("ca: bad serial %q (want hexadecimal, as 'cohort ca list' prints it)", s)
	}
	return n, nil
}

// record appends cert to the CA's index.
func record(dir string, cert *x509.Certificate) error {
	f, err := os.OpenFile(filepath.Join(dir, IndexFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFiles, err)
	}
	_, err = fmt.Fprintf(f, "%s %s %s\n", SerialText(cert.SerialNumber), cert.NotAfter.UTC().Format(time.RFC3339), cert.Subject.CommonName)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrFiles, err)
	}
	return nil
}

// List returns the certificates the CA in dir issued, sorted by name and
// expiry: those of its index, and those of NAME.crt files in dir that it
// signed but that its index lacks (issued before it kept one), each with
// its revocation time if it is on the CA's revocation list.
func List(dir string) ([]Issued, error) {
	caCert, _, err := load(dir, "ca")
	if err != nil {
		return nil, err
	}
	var out []Issued
	seen := map[string]bool{}
	add := func(is Issued) {
		if k := SerialText(is.Serial); !seen[k] {
			seen[k] = true
			out = append(out, is)
		}
	}
	path := filepath.Join(dir, IndexFile)
	f, err := os.Open(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrFiles, err)
	default:
		defer f.Close()
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			is, err := parseIndexLine(sc.Text())
			if err != nil {
				return nil, fmt.Errorf("%w: %s:%d: %v", ErrFiles, path, line, err)
			}
			add(is)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrFiles, path, err)
		}
	}
	crts, _ := filepath.Glob(filepath.Join(dir, "*.crt"))
	for _, p := range crts {
		if filepath.Base(p) == "ca.crt" {
			continue
		}
		if c, err := readCert(p); err == nil && c.CheckSignatureFrom(caCert) == nil {
			add(Issued{Name: c.Subject.CommonName, Serial: c.SerialNumber, NotAfter: c.NotAfter})
		}
	}
	revoked, err := RevokedSerials(dir)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Revoked = revoked[SerialText(out[i].Serial)]
	}
	slices.SortFunc(out, func(a, b Issued) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), a.NotAfter.Compare(b.NotAfter), a.Serial.Cmp(b.Serial))
	})
	return out, nil
}

func parseIndexLine(s string) (Issued, error) {
	f := strings.Fields(s)
	if len(f) != 3 {
		return Issued{}, fmt.Errorf("%q: want SERIAL NOT-AFTER NAME", s)
	}
	n, err := ParseSerial(f[0])
	if err != nil {
		return Issued{}, err
	}
	t, err := time.Parse(time.RFC3339, f[1])
	if err != nil {
		return Issued{}, err
	}
	return Issued{Name: f[2], Serial: n, NotAfter: t}, nil
}

// readCert reads one PEM certificate.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFiles, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: %s is not a PEM certificate", ErrFiles, path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFiles, path, err)
	}
	return c, nil
}

// Renew replaces out/NAME.crt and out/NAME.key with a new key and a
// certificate valid for validity (as IssueFor), for a member whose
// certificate is about to expire. The files are replaced by renaming new
// ones over them, never written through. The old certificate stays valid
// until it expires: revoke it by serial ([RevokeSerial]) once the member
// uses the new one, if it must stop sooner.
func Renew(dir, out, name string, validity time.Duration) (*x509.Certificate, error) {
	if _, err := os.Stat(filepath.Join(out, name+".crt")); err != nil {
		return nil, fmt.Errorf("%w: no certificate to renew: %v (issue one)", ErrFiles, err)
	}
	cert, key, err := sign(dir, name, validity)
	if err != nil {
		return nil, err
	}
	if err := replacePair(out, name, cert.Raw, key); err != nil {
		return nil, err
	}
	return cert, nil
}

// replacePair writes base.key (0600) and base.crt (0644) into dir through
// new temporary files renamed over the old ones: a rename replaces a
// symbolic link rather than following it, and the modes are the new
// files'.
func replacePair(dir, base string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(dir, base+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600},
		{filepath.Join(dir, base+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644},
	}
	tmps := make([]string, len(files))
	defer func() {
		for _, t := range tmps {
			if t != "" {
				os.Remove(t)
			}
		}
	}()
	for i, f := range files {
		t, err := writeTemp(dir, f.data, f.mode)
		if err != nil {
			return err
		}
		tmps[i] = t
	}
	for i, f := range files {
		if err := os.Rename(tmps[i], f.path); err != nil {
			return fmt.Errorf("%w: %v", ErrFiles, err)
		}
		tmps[i] = ""
	}
	return nil
}

// writeTemp writes data into a new file of dir (created with O_EXCL, so
// nothing existing is written through) with mode, synced, and returns its
// path.
func writeTemp(dir string, data []byte, mode os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrFiles, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("%w: %v", ErrFiles, err)
	}
	return f.Name(), nil
}
