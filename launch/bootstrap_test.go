package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func validEnv() map[string]string {
	return map[string]string{
		EnvJobID:      "job-1",
		EnvRank:       "2",
		EnvSize:       "4",
		EnvRendezvous: "127.0.0.1:4000",
		EnvSecret:     strings.Repeat("ab", 16),
	}
}

func getter(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func TestFromEnvNotLaunched(t *testing.T) {
	_, err := FromEnv(getter(map[string]string{"HOME": "/root"}))
	if !errors.Is(err, ErrNotLaunched) {
		t.Fatalf("got %v, want ErrNotLaunched", err)
	}
}

func TestFromEnvRoundTrip(t *testing.T) {
	env := validEnv()
	env[EnvFanout] = "8"
	env[EnvDetector] = "dbrr"
	env[EnvDialOutOnly] = "1"
	b, err := FromEnv(getter(env))
	if err != nil {
		t.Fatal(err)
	}
	if b.JobID != "job-1" || b.Rank != 2 || b.Size != 4 || b.Rendezvous != "127.0.0.1:4000" || len(b.Secret) != 16 || b.Fanout != 8 || b.Detector != "dbrr" || !b.DialOutOnly {
		t.Fatalf("got %+v", b)
	}
	back := map[string]string{}
	for _, kv := range b.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		back[k] = v
	}
	b2, err := FromEnv(getter(back))
	if err != nil {
		t.Fatal(err)
	}
	if b2.JobID != b.JobID || b2.Rank != b.Rank || b2.Size != b.Size || string(b2.Secret) != string(b.Secret) || b2.Fanout != 8 || b2.Detector != "dbrr" || !b2.DialOutOnly {
		t.Fatalf("Environ does not round-trip: got %+v, want %+v", b2, b)
	}
}

// The last Spares processes of Size are the spares; the job's ranks are
// the others.
func TestFromEnvSpares(t *testing.T) {
	env := validEnv()
	env[EnvSpares] = "1"
	for rank, spare := range []bool{false, false, false, true} {
		env[EnvRank] = fmt.Sprint(rank)
		b, err := FromEnv(getter(env))
		if err != nil {
			t.Fatal(err)
		}
		if b.Spares != 1 || b.Ranks() != 3 || b.IsSpare() != spare {
			t.Errorf("rank %d: Spares %d, Ranks() %d, IsSpare() %v; want 1, 3, %v", rank, b.Spares, b.Ranks(), b.IsSpare(), spare)
		}
		if !slices.Contains(b.Environ(), EnvSpares+"=1") {
			t.Errorf("Environ() %q lacks %s", b.Environ(), EnvSpares)
		}
	}
}

// Every malformed variable gets an error naming it.
func TestFromEnvBad(t *testing.T) {
	cases := []struct {
		name, key, value, want string
	}{
		{"no job", EnvJobID, "", EnvJobID + " is not set"},
		{"long job", EnvJobID, strings.Repeat("j", 200), "limit is 128"},
		{"no rank", EnvRank, "", EnvRank + " is not set"},
		{"rank not a number", EnvRank, "two", EnvRank + `="two" is not a decimal integer`},
		{"rank too big", EnvRank, "4", EnvRank + "=4 is out of range for " + EnvSize + "=4"},
		{"negative rank", EnvRank, "-1", EnvRank + "=-1 is out of range"},
		{"size zero", EnvSize, "0", EnvSize + "=0, want 1 to"},
		{"size huge", EnvSize, "99999999", EnvSize + "=99999999"},
		{"size not a number", EnvSize, "4x", EnvSize + `="4x"`},
		{"no rendezvous", EnvRendezvous, "", EnvRendezvous + " is not set"},
		{"rendezvous no port", EnvRendezvous, "localhost", EnvRendezvous + `="localhost"`},
		{"rendezvous port zero", EnvRendezvous, "127.0.0.1:0", "port \"0\""},
		{"rendezvous no host", EnvRendezvous, ":80", "no host"},
		{"secret not hex", EnvSecret, "zz" + strings.Repeat("ab", 16), EnvSecret + " is not hex"},
		{"secret short", EnvSecret, "abcd", EnvSecret + " has 2 bytes, want at least 16"},
		{"no secret", EnvSecret, "", EnvSecret + " is not set"},
		{"fanout not a number", EnvFanout, "four", EnvFanout + `="four"`},
		{"fanout zero", EnvFanout, "0", EnvFanout + "=0"},
		{"fanout not power of two", EnvFanout, "3", EnvFanout + "=3"},
		{"detector unknown", EnvDetector, "swim", EnvDetector + `="swim", want one of brr, dbrr, heartbeat`},
		{"spares not a number", EnvSpares, "one", EnvSpares + `="one"`},
		{"spares negative", EnvSpares, "-1", EnvSpares + "=-1 with " + EnvSize + "=4: want 0 to 3 spares"},
		{"spares leave no rank", EnvSpares, "4", EnvSpares + "=4 with " + EnvSize + "=4"},
		{"spares and replicas", EnvReplicas, "2", "spares and replicas do not go together"},
		{"dial-out-only not 0 or 1", EnvDialOutOnly, "yes", EnvDialOutOnly + `="yes", want 1 or 0`},
		{"newcomer not 0 or 1", EnvNewcomer, "yes", EnvNewcomer + `="yes", want 1 or 0`},
		{"newcomer numbered as of the start", EnvNewcomer, "1", EnvRank + "=2 with " + EnvNewcomer + "=1 and " + EnvSize + "=4: a newcomer's number is from 4 to 65"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := validEnv()
			if c.key == EnvReplicas {
				env[EnvSpares] = "2"
			}
			env[c.key] = c.value
			_, err := FromEnv(getter(env))
			if !errors.Is(err, ErrBootstrap) {
				t.Fatalf("got %v, want an ErrBootstrap", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// A newcomer's number follows the job's start; it is a spare, and its
// bootstrap round-trips through the environment.
func TestFromEnvNewcomer(t *testing.T) {
	env := validEnv()
	env[EnvSpares] = "1"
	env[EnvNewcomer] = "1"
	for _, c := range []struct {
		rank string
		ok   bool
	}{{"3", false}, {"4", true}, {"65", true}, {"66", false}} {
		env[EnvRank] = c.rank
		b, err := FromEnv(getter(env))
		if (err == nil) != c.ok {
			t.Fatalf("newcomer rank %s of size 4: err %v, want ok %v", c.rank, err, c.ok)
		}
		if err != nil {
			continue
		}
		if !b.Newcomer || !b.IsSpare() || b.Ranks() != 3 {
			t.Errorf("rank %s: Newcomer %v, IsSpare %v, Ranks %d; want true, true, 3", c.rank, b.Newcomer, b.IsSpare(), b.Ranks())
		}
		if rank, size, _ := b.Logical(); fmt.Sprint(rank) != c.rank || size != 4 {
			t.Errorf("rank %s: Logical() = %d, %d; want %s, 4", c.rank, rank, size, c.rank)
		}
		if !slices.Contains(b.Environ(), EnvNewcomer+"=1") {
			t.Errorf("Environ() %q lacks %s", b.Environ(), EnvNewcomer)
		}
	}
	b := Bootstrap{JobID: "j", Rank: 4, Size: 4, Secret: make([]byte, MinSecretLen), Newcomer: true, Exchange: nopExchanger{}}
	if err := b.Validate(); err == nil || !strings.Contains(err.Error(), "through the launcher's rendezvous") {
		t.Errorf("a newcomer under an exchanger: %v", err)
	}
}

type nopExchanger struct{}

func (nopExchanger) Exchange(context.Context, string) ([]string, error) { return nil, nil }
func (nopExchanger) Close() error                                       { return nil }
