package tcp_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/transport/tcp"
	"github.com/cohort-mp/cohort/wire"
)

// mixedSizes are the payload sizes of TestRelayMixedSizes's stream, in
// turn: frames that a relay and the destination read into buffers of
// their own (relay_in.go, placeRelayed; reused from one frame to the
// next, of another size), around the smallest such frame
// (wire.PlaceMin), and smaller ones that go through the frame reader's
// buffer.
var mixedSizes = []int{1<<20 + 3, 8, wire.PlaceMin + 200, 600 << 10, 100, wire.PlaceMin - 300, 2<<20 + 1, 8}

// patternEnd checks that the frames of one sender arrive in order with
// the sizes of mixedSizes and their bytes intact (fillPattern), and
// signals the last.
type patternEnd struct {
	mu   sync.Mutex
	next uint64
	bad  error
	last uint64
	done chan struct{}
}

func (e *patternEnd) Deliver(f wire.Frame) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if f.Kind != seqKind {
		return
	}
	i := e.next
	e.next++
	want := make([]byte, mixedSizes[i%uint64(len(mixedSizes))])
	fillPattern(want, i)
	if e.bad == nil && string(f.Payload) != string(want) {
		e.bad = fmt.Errorf("frame %d: %d bytes, not the %d sent (number %d)", i, len(f.Payload), len(want), binary.LittleEndian.Uint64(f.Payload))
	}
	if i == e.last {
		close(e.done)
	}
}

func (e *patternEnd) Hint(core.PeerHint) {}

// fillPattern fills b with frame i's bytes: its number, then bytes that
// depend on the number and the offset.
func fillPattern(b []byte, i uint64) {
	for j := range b {
		b[j] = byte(i*7 + uint64(j)*13 + uint64(j>>9))
	}
	if len(b) >= 8 {
		binary.LittleEndian.PutUint64(b, i)
	}
}

// TestRelayMixedSizes relays a stream of frames of mixed sizes (above):
// every byte arrives intact and in order, over plain sockets and over
// records: no buffer is reused while a frame in it is forwarded or
// delivered.
func TestRelayMixedSizes(t *testing.T) {
	for _, records := range []bool{false, true} {
		t.Run(fmt.Sprintf("records=%v", records), func(t *testing.T) {
			const n = 3 * 8
			end := &patternEnd{last: n - 1, done: make(chan struct{})}
			var trs [3]*tcp.Transport
			for i := range trs {
				cfg := config(core.NodeID(i+1), nil)
				cfg.NoUnix = true
				if records {
					cfg.Integrity = tcp.IntegrityAlways
				}
				trs[i] = listen(t, cfg)
			}
			for i, a := range trs {
				for j, c := range trs {
					if i != j {
						a.SetPeer(core.NodeID(j+1), c.Addr())
					}
				}
			}
			trs[0].SetHandler(&patternEnd{done: make(chan struct{})})
			trs[1].SetHandler(&patternEnd{done: make(chan struct{})})
			trs[2].SetHandler(end)
			trs[0].BlockPeer(3, true)
			trs[2].BlockPeer(1, true)
			trs[0].Keep([]core.NodeID{2})
			trs[2].Keep([]core.NodeID{2})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for i := range uint64(n) {
				b := make([]byte, mixedSizes[i%uint64(len(mixedSizes))])
				fillPattern(b, i)
				if err := trs[0].Send(ctx, 3, wire.Frame{Kind: seqKind, Payload: b}); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-end.done:
			case <-ctx.Done():
				end.mu.Lock()
				got := end.next
				end.mu.Unlock()
				t.Fatalf("3 has %d of 1's %d frames: %v", got, n, ctx.Err())
			}
			end.mu.Lock()
			defer end.mu.Unlock()
			if end.bad != nil {
				t.Fatal(end.bad)
			}
			if f := trs[1].Stats().Forwarded; f < n {
				t.Errorf("2 forwarded %d frames, want %d or more", f, n)
			}
		})
	}
}
