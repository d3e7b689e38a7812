// Package reserve is a peer daemon's gatekeeper (P2P-MPI §3, the
// reservation service): it accepts at most J jobs at a time and at most P
// processes of any one job, from allowed submitters only, and hands out
// reservation tokens that hold the slots until the submitter confirms
// them (the job is launched), releases them (overbooking: not selected),
// or lets them expire. Every refusal says why.
//
// It is a plain data structure with an injected clock, safe for concurrent
// use.
package reserve

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Config is the daemon owner's policy.
type Config struct {
	// Jobs is J, how many jobs may hold slots at once.
	Jobs int
	// ProcsPerJob is P, how many processes of one job the host runs.
	ProcsPerJob int
	// Allowed lists the submitters (certificate names) allowed.
	Allowed []string
	// AllowAll allows every member of the cluster instead: it must be
	// asked for, an empty Allowed alone allowing no one.
	AllowAll bool
	// Hold is how long an unconfirmed reservation holds its slots.
	Hold time.Duration
}

// DefaultConfig is J = 1, P = 1 (one process of one job at a time), no
// submitter allowed yet, tokens held 30 s.
func DefaultConfig() Config {
	return Config{Jobs: 1, ProcsPerJob: 1, Hold: 30 * time.Second}
}

// Errors: refusals, each wrapped with the details.
var (
	ErrNotAllowed = errors.New("reserve: submitter not allowed")
	ErrBusy       = errors.New("reserve: no free job slot")
	ErrTooMany    = errors.New("reserve: more processes than this host accepts per job")
	ErrUnknown    = errors.New("reserve: unknown or expired token")
	ErrConfig     = errors.New("reserve: invalid configuration")
)

// Validate reports an invalid policy.
func (c Config) Validate() error {
	if c.Jobs < 1 || c.ProcsPerJob < 1 || c.Hold <= 0 {
		return fmt.Errorf("%w: jobs %d, procs per job %d, hold %v (want ≥ 1, ≥ 1, > 0)", ErrConfig, c.Jobs, c.ProcsPerJob, c.Hold)
	}
	return nil
}

// Token is a reservation.
type Token struct {
	ID        string
	Submitter string
	Job       string
	Procs     int
	Confirmed bool
	expires   time.Time
}

// Gate holds a host's reservations.
type Gate struct {
	mu     sync.Mutex
	cfg    Config
	now    func() time.Time
	tokens map[string]*Token
}

// New returns a gate with the policy cfg and the clock now (nil:
// time.Now).
func New(cfg Config, now func() time.Time) (*Gate, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Gate{cfg: cfg, now: now, tokens: map[string]*Token{}}, nil
}

// expireLocked drops unconfirmed tokens past their hold.
func (g *Gate) expireLocked() {
	now := g.now()
	for id, t := range g.tokens {
		if !t.Confirmed && now.After(t.expires) {
			delete(g.tokens, id)
		}
	}
}

// Reserve asks for procs slots of job for submitter. A job may hold one
// token per host; job names are the submitter's own (two submitters may
// both run a job of the same name).
func (g *Gate) Reserve(submitter, job string, procs int) (Token, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.cfg.AllowAll && !slices.Contains(g.cfg.Allowed, submitter) {
		if len(g.cfg.Allowed) == 0 {
			return Token{}, fmt.Errorf("%w: %q: this host allows no submitter", ErrNotAllowed, submitter)
		}
		return Token{}, fmt.Errorf("%w: %q is not in this host's list", ErrNotAllowed, submitter)
	}
	if procs < 1 || procs > g.cfg.ProcsPerJob {
		return Token{}, fmt.Errorf("%w: %d asked, this host accepts %d per job", ErrTooMany, procs, g.cfg.ProcsPerJob)
	}
	g.expireLocked()
	jobs := 0
	for _, t := range g.tokens {
		if t.Job == job && t.Submitter == submitter {
			return Token{}, fmt.Errorf("%w: job %q already holds a reservation here", ErrBusy, job)
		}
		jobs++
	}
	if jobs >= g.cfg.Jobs {
		return Token{}, fmt.Errorf("%w: %d of %d jobs already hold slots here", ErrBusy, jobs, g.cfg.Jobs)
	}
	var b [16]byte
	rand.Read(b[:])
	t := &Token{ID: hex.EncodeToString(b[:]), Submitter: submitter, Job: job, Procs: procs, expires: g.now().Add(g.cfg.Hold)}
	g.tokens[t.ID] = t
	return *t, nil
}

// Confirm turns a held token into a running job's (the processes are
// launched); only its submitter may.
func (g *Gate) Confirm(submitter, id string) (Token, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked()
	t := g.tokens[id]
	if t == nil || t.Submitter != submitter {
		return Token{}, fmt.Errorf("%w: token %.8s", ErrUnknown, id)
	}
	t.Confirmed = true
	return *t, nil
}

// Release frees a token's slots (an overbooked host not selected, or a job
// that ended); only its submitter may.
func (g *Gate) Release(submitter, id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	t := g.tokens[id]
	if t == nil || t.Submitter != submitter {
		return fmt.Errorf("%w: token %.8s", ErrUnknown, id)
	}
	delete(g.tokens, id)
	return nil
}

// Tokens lists the live reservations, confirmed or held, sorted by job.
func (g *Gate) Tokens() []Token {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expireLocked()
	var out []Token
	for _, t := range g.tokens {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Token) int {
		if a.Job < b.Job {
			return -1
		}
		if a.Job > b.Job {
			return 1
		}
		return 0
	})
	return out
}
