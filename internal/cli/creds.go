package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"

	"github.com/cohort-mp/cohort/p2p/ca"
)

// defaultName is the certificate name a member presents when --name is
// not given: $USER, else the login name of the current user (a service or
// a container often runs without $USER), else the host name.
func defaultName() string {
	return firstName(os.Getenv("USER"), func() string {
		if u, err := user.Current(); err == nil {
			return u.Username
		}
		return ""
	}, func() string {
		h, _ := os.Hostname()
		return h
	})
}

// firstName returns env if it is not empty, else the first non-empty
// answer of the fallbacks, in order.
func firstName(env string, fallbacks ...func() string) string {
	if env != "" {
		return env
	}
	for _, f := range fallbacks {
		if n := f(); n != "" {
			return n
		}
	}
	return ""
}

// loadCreds loads the credentials of member name (ca.Load), first naming
// a missing file with the command that makes it: a newcomer's first try
// meets a machine without a CA, and "no such file" alone does not say
// what to do.
func loadCreds(caFile, certs, name string) (*ca.Credentials, error) {
	if err := checkCredFiles(caFile, certs, name); err != nil {
		return nil, err
	}
	return ca.Load(caFile, certs, name)
}

// checkCredFiles says which of the CA's certificate and name's
// certificate and key is missing, and how to make it.
func checkCredFiles(caFile, certs, name string) error {
	if missing(caFile) {
		return fmt.Errorf("the cluster CA's certificate %s is missing: make the CA with 'cohort ca init' (on one machine; copy its ca.crt to the others)", caFile)
	}
	for _, ext := range []string{".crt", ".key"} {
		if p := filepath.Join(certs, name+ext); missing(p) {
			return fmt.Errorf("%s is missing: issue %s's certificate with 'cohort ca issue %s' where the CA's key is (and copy %s.crt and %s.key here)",
				p, name, name, name, name)
		}
	}
	return nil
}

func missing(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}
