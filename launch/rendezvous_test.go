package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

func newTestRendezvous(t *testing.T, size int) *Rendezvous {
	t.Helper()
	rz, err := NewRendezvous(RendezvousConfig{JobID: "job-t", Secret: testSecret, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rz.Close() })
	return rz
}

func bootFor(rz *Rendezvous, rank int) Bootstrap {
	return Bootstrap{JobID: rz.cfg.JobID, Rank: rank, Size: rz.cfg.Size, Rendezvous: rz.Addr(), Secret: rz.cfg.Secret}
}

type regResult struct {
	reg *Registration
	err error
}

// registerAll registers the given ranks concurrently; rank r claims the
// address 127.0.0.1:(5000+r).
func registerAll(ctx context.Context, rz *Rendezvous, ranks []int) []regResult {
	out := make([]regResult, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Go(func() {
			reg, err := bootFor(rz, r).Register(ctx, fmt.Sprintf("127.0.0.1:%d", 5000+r))
			out[i] = regResult{reg, err}
		})
	}
	wg.Wait()
	return out
}

func TestRendezvousTable(t *testing.T) {
	const n = 5
	rz := newTestRendezvous(t, n)
	res := registerAll(context.Background(), rz, []int{0, 1, 2, 3, 4})
	want := []string{"127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003", "127.0.0.1:5004"}
	for r, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v", r, x.err)
		}
		if !slices.Equal(x.reg.Addrs, want) {
			t.Fatalf("rank %d got table %v, want %v", r, x.reg.Addrs, want)
		}
	}
	got, err := rz.Wait(context.Background())
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Wait = %v, %v; want %v", got, err, want)
	}
	// A rank's Close is its own end: no error. The launcher's Close is
	// the others' Lost, with an error.
	res[0].reg.Close()
	if err := res[0].reg.Err(); err != nil {
		t.Fatalf("Err after our own Close = %v, want nil", err)
	}
	rz.Close()
	for r, x := range res[1:] {
		<-x.reg.Lost()
		if !errors.Is(x.reg.Err(), ErrRendezvous) {
			t.Fatalf("rank %d: Err after the launcher closed = %v, want ErrRendezvous", r+1, x.reg.Err())
		}
		x.reg.Close()
	}
}

// The handshake refuses a rank without the job secret or of another job.
func TestRendezvousRefusesStrangers(t *testing.T) {
	rz := newTestRendezvous(t, 2)
	ctx := context.Background()
	b := bootFor(rz, 0)
	b.Secret = []byte("another secret of 32 bytes......")
	if _, err := b.Register(ctx, "127.0.0.1:5000"); !errors.Is(err, ErrRendezvous) || !strings.Contains(err.Error(), wire.ErrAuth.Error()) {
		t.Fatalf("wrong secret: got %v, want an authentication failure", err)
	}
	b = bootFor(rz, 0)
	b.JobID = "other-job"
	if _, err := b.Register(ctx, "127.0.0.1:5000"); !errors.Is(err, ErrRendezvous) || !strings.Contains(err.Error(), "job id mismatch") {
		t.Fatalf("other job: got %v, want a job id mismatch", err)
	}
	if got := rz.Missing(); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("strangers registered: missing %v", got)
	}
}

// Mistakes of a rank are refused with a reason it can print.
func TestRendezvousRefusesBadRegistrations(t *testing.T) {
	rz := newTestRendezvous(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := bootFor(rz, 1)
	b.Size = 3
	b.Rank = 2
	if _, err := b.Register(ctx, "127.0.0.1:5000"); err == nil || !strings.Contains(err.Error(), "rank 2 is out of range for a job of 2 ranks") {
		t.Fatalf("rank out of range: got %v", err)
	}
	b = bootFor(rz, 1)
	b.Size = 3
	if _, err := b.Register(ctx, "127.0.0.1:5000"); err == nil || !strings.Contains(err.Error(), "believes the job has 3 ranks; it has 2") {
		t.Fatalf("wrong size: got %v", err)
	}
	if _, err := bootFor(rz, 1).Register(ctx, "no-port"); !errors.Is(err, ErrRendezvous) {
		t.Fatalf("bad listen address: got %v", err)
	}
	// Rank 1 registers and waits; a second rank 1 is refused.
	first := make(chan regResult, 1)
	go func() {
		reg, err := bootFor(rz, 1).Register(ctx, "127.0.0.1:5001")
		first <- regResult{reg, err}
	}()
	waitRegistered(t, rz, 1)
	if _, err := bootFor(rz, 1).Register(ctx, "127.0.0.1:5009"); err == nil || !strings.Contains(err.Error(), "rank 1 is already registered") {
		t.Fatalf("duplicate rank: got %v", err)
	}
	cancel()
	if x := <-first; !errors.Is(x.err, context.Canceled) {
		t.Fatalf("Register after its ctx ended: got %v, want context.Canceled", x.err)
	}
}

// waitRegistered waits until rank has registered.
func waitRegistered(t *testing.T, rz *Rendezvous, rank int) {
	t.Helper()
	waitFor(t, rz, fmt.Sprintf("rank %d registered", rank), func() bool {
		ranks, _ := rz.Registered()
		return slices.Contains(ranks, rank)
	})
}

// waitFor waits until cond holds, checking it at each change of the
// rendezvous's registrations (never on a clock), within a generous bound.
func waitFor(t *testing.T, rz *Rendezvous, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-rz.notify:
		case <-deadline:
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// An aborted rendezvous releases every waiting rank with the reason.
func TestRendezvousAbort(t *testing.T) {
	rz := newTestRendezvous(t, 3)
	done := make(chan []regResult)
	go func() { done <- registerAll(context.Background(), rz, []int{0, 2}) }()
	waitRegistered(t, rz, 0)
	waitRegistered(t, rz, 2)
	if got := rz.Missing(); !slices.Equal(got, []int{1}) {
		t.Fatalf("Missing = %v, want [1]", got)
	}
	rz.Abort("rank 1 exited before registering")
	for _, x := range <-done {
		if !errors.Is(x.err, ErrRendezvous) || !strings.Contains(x.err.Error(), "rank 1 exited before registering") {
			t.Fatalf("got %v, want the abort's reason", x.err)
		}
	}
	if _, err := rz.Wait(context.Background()); !errors.Is(err, ErrRendezvous) {
		t.Fatalf("Wait after Abort = %v", err)
	}
	// A late rank is told too.
	if _, err := bootFor(rz, 1).Register(context.Background(), "127.0.0.1:5001"); err == nil || !strings.Contains(err.Error(), "rank 1 exited before registering") {
		t.Fatalf("late rank: got %v", err)
	}
}

// A rank whose connection ends before the table frees its place.
func TestRendezvousRankLeavesBeforeTable(t *testing.T) {
	rz := newTestRendezvous(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := bootFor(rz, 0).Register(ctx, "127.0.0.1:5000")
		errc <- err
	}()
	waitRegistered(t, rz, 0)
	cancel()
	<-errc
	waitFor(t, rz, "rank 0's place is free", func() bool { return slices.Equal(rz.Missing(), []int{0, 1}) })
	res := registerAll(context.Background(), rz, []int{0, 1})
	for _, x := range res {
		if x.err != nil {
			t.Fatal(x.err)
		}
		x.reg.Close()
	}
}

func TestRendezvousConfig(t *testing.T) {
	for _, cfg := range []RendezvousConfig{
		{JobID: "j", Secret: testSecret, Size: 0},
		{JobID: "", Secret: testSecret, Size: 2},
		{JobID: "j", Secret: []byte("short"), Size: 2},
		{JobID: "j", Secret: testSecret, Size: 2, Addr: "nonsense"},
	} {
		if rz, err := NewRendezvous(cfg); err == nil {
			rz.Close()
			t.Fatalf("%+v accepted", cfg)
		}
	}
}

// A newcomer registers after the table: only once the launcher expects
// it, and only once every member still connected took its address (a
// member's handler set after the news came gets it then); its table
// holds the addresses up to its own, and says which member is gone.
func TestRendezvousNewcomer(t *testing.T) {
	rz := newTestRendezvous(t, 3)
	res := registerAll(context.Background(), rz, []int{0, 1, 2})
	for r, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v", r, x.err)
		}
		defer x.reg.Close()
	}
	res[2].reg.Close()
	waitFor(t, rz, "rank 2's end", func() bool {
		rz.mu.Lock()
		defer rz.mu.Unlock()
		return rz.late.gone[2]
	})
	var mu sync.Mutex
	news := map[int][]string{}
	onJoin := func(member int) func(int, string) {
		return func(p int, addr string) {
			mu.Lock()
			defer mu.Unlock()
			news[member] = append(news[member], fmt.Sprintf("%d@%s", p, addr))
		}
	}
	res[0].reg.SetOnJoin(onJoin(0))
	boot := bootFor(rz, 3)
	boot.Newcomer = true
	if _, err := boot.Register(context.Background(), "127.0.0.1:5003"); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("a newcomer not expected: %v, want a refusal", err)
	}
	if err := rz.Expect(3); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{2, 3, 3 + MaxNewcomers} {
		if err := rz.Expect(p); err == nil {
			t.Errorf("Expect(%d) = nil, want an error", p)
		}
	}
	done := make(chan regResult)
	go func() {
		reg, err := boot.Register(context.Background(), "127.0.0.1:5003")
		done <- regResult{reg, err}
	}()
	res[1].reg.SetOnJoin(onJoin(1))
	x := <-done
	if x.err != nil {
		t.Fatal(x.err)
	}
	defer x.reg.Close()
	if want := []string{"127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"}; !slices.Equal(x.reg.Addrs, want) || !slices.Equal(x.reg.Gone, []int{2}) {
		t.Errorf("the newcomer's table %q, gone %v; want %q, gone [2]", x.reg.Addrs, x.reg.Gone, want)
	}
	mu.Lock()
	for _, m := range []int{0, 1} {
		if want := []string{"3@127.0.0.1:5003"}; !slices.Equal(news[m], want) {
			t.Errorf("member %d learned %q before the newcomer's table, want %q", m, news[m], want)
		}
	}
	mu.Unlock()
	if got := rz.Joined(); !slices.Equal(got, []int{3}) {
		t.Errorf("Joined() = %v, want [3]", got)
	}
	again := bootFor(rz, 3)
	again.Newcomer = true
	if _, err := again.Register(context.Background(), "127.0.0.1:5004"); err == nil {
		t.Errorf("process 3 registered twice")
	}
}
