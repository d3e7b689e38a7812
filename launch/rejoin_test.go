package launch

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/wire"
)

// The late registration's decoders refuse what they cannot read, never
// panic, and read back what was encoded.
func FuzzRejoinMessages(f *testing.F) {
	var e wire.Encoder
	newcomerTableMsg{Addrs: []string{"127.0.0.1:1", "", "127.0.0.1:3"}, Gone: []int{1}}.MarshalWire(&e)
	f.Add(slices.Clone(e.B))
	e.B = e.B[:0]
	joinedMsg{Process: 7, Addr: "10.0.0.1:4000"}.MarshalWire(&e)
	f.Add(slices.Clone(e.B))
	f.Add([]byte{3, 0, 0, 0, 2, 1, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		if m, err := decodeNewcomerTable(p, 2); err == nil {
			var e wire.Encoder
			m.MarshalWire(&e)
			back, err := decodeNewcomerTable(e.B, 2)
			if err != nil || !slices.Equal(back.Addrs, m.Addrs) || !slices.Equal(back.Gone, m.Gone) {
				t.Fatalf("%+v does not read back: %+v, %v", m, back, err)
			}
		}
		if m, err := decodeJoined(p); err == nil {
			var e wire.Encoder
			m.MarshalWire(&e)
			if back, err := decodeJoined(e.B); err != nil || back != m {
				t.Fatalf("%+v does not read back: %+v, %v", m, back, err)
			}
		}
		decodeJoinedAck(p)
	})
}

// Two newcomers registering at once: the second waits until the first
// has its table, so that the first, which reads nothing but its table
// until then, is told of the second only as a member. Member 0 takes
// its time to acknowledge the first newcomer (its handler is set late),
// and the second newcomer connects meanwhile.
func TestRendezvousNewcomersOneAtATime(t *testing.T) {
	rz := newTestRendezvous(t, 2)
	res := registerAll(context.Background(), rz, []int{0, 1})
	for r, x := range res {
		if x.err != nil {
			t.Fatalf("rank %d: %v", r, x.err)
		}
		defer x.reg.Close()
	}
	var mu sync.Mutex
	news := map[int][]int{}
	onJoin := func(member int) func(int, string) {
		return func(p int, _ string) {
			mu.Lock()
			defer mu.Unlock()
			news[member] = append(news[member], p)
		}
	}
	res[1].reg.SetOnJoin(onJoin(1))
	for _, p := range []int{2, 3} {
		if err := rz.Expect(p); err != nil {
			t.Fatal(err)
		}
	}
	register := func(p int) chan regResult {
		done := make(chan regResult, 1)
		go func() {
			boot := bootFor(rz, p)
			boot.Newcomer = true
			reg, err := boot.Register(context.Background(), fmt.Sprintf("127.0.0.1:%d", 5000+p))
			done <- regResult{reg, err}
		}()
		return done
	}
	first := register(2)
	waitFor(t, rz, "the first newcomer waiting for member 0", func() bool {
		rz.mu.Lock()
		defer rz.mu.Unlock()
		return rz.late.waits[2][0]
	})
	second := register(3)
	deadline := time.After(10 * time.Second)
	for {
		rz.mu.Lock()
		n := len(rz.conns)
		rz.mu.Unlock()
		if n == 4 || len(first) > 0 { // the first may have failed
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the second newcomer never connected")
		case <-time.After(10 * time.Millisecond):
		}
	}
	res[0].reg.SetOnJoin(onJoin(0))
	x := <-first
	if x.err != nil {
		t.Fatalf("the first newcomer: %v", x.err)
	}
	defer x.reg.Close()
	x.reg.SetOnJoin(onJoin(2))
	y := <-second
	if y.err != nil {
		t.Fatalf("the second newcomer: %v", y.err)
	}
	defer y.reg.Close()
	if want := []string{"127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002", "127.0.0.1:5003"}; !slices.Equal(y.reg.Addrs, want) {
		t.Errorf("the second newcomer's table %q, want %q", y.reg.Addrs, want)
	}
	mu.Lock()
	defer mu.Unlock()
	for m, want := range map[int][]int{0: {2, 3}, 1: {2, 3}, 2: {3}} {
		if !slices.Equal(news[m], want) {
			t.Errorf("process %d learned of newcomers %v, want %v", m, news[m], want)
		}
	}
}
