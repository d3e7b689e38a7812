package launch

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// The variables of an encrypted job: the job's certificate and its key, in
// PEM. A launcher sets them, like the secret, only in the ranks'
// environment.
const (
	EnvTLSCert = "COHORT_TLS_CERT"
	EnvTLSKey  = "COHORT_TLS_KEY"
)

// jobCertValidity bounds a job certificate's life.
const jobCertValidity = 30 * 24 * time.Hour

// NewJobTLS makes the certificate of an encrypted job: an ECDSA P-256 key
// and a self-signed certificate naming the job (common name and DNS name),
// for client and server use. Every rank of the job presents it and trusts
// it alone, so the ranks' connections are TLS 1.3 among holders of the
// job's key; the job secret's proof still runs inside.
func NewJobTLS(jobID string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: jobID},
		DNSNames:              []string{jobID},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(jobCertValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// TLSConfig returns the TLS configuration of an encrypted job's
// connections (nil when the job is not encrypted): TLS 1.3, the job's
// certificate presented by both ends, and only that certificate trusted.
func (b Bootstrap) TLSConfig() (*tls.Config, error) {
	if len(b.TLSCert) == 0 && len(b.TLSKey) == 0 {
		return nil, nil
	}
	pair, err := tls.X509KeyPair(b.TLSCert, b.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("%w: %s/%s: %v", ErrBootstrap, EnvTLSCert, EnvTLSKey, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBootstrap, EnvTLSCert, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{pair},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   leaf.Subject.CommonName,
	}, nil
}
