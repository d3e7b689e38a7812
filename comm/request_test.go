package comm

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

var reqSeed = flag.Uint64("req.seed", 0, "seed of TestPooledRequestHandOff (0: from the clock)")

// TestPooledRequestHandOff: the request of a blocking call, completed by
// other goroutines at random moments against each way its call may wait
// (polled, parked, parked then cancelled, on a Done channel, polled with
// a Done channel made), is released
// and taken again, the same request each time: every use ends with its
// own outcome, never woken by a token of an earlier use, and a second
// complete never overrides the first. The race detector also checks that
// release never hands back a request that complete still touches.
func TestPooledRequestHandOff(t *testing.T) {
	seed := seedOf(t, reqSeed, "req.seed")
	rng := rand.New(rand.NewPCG(seed, 0))
	s := &Session{}
	errSecond := errors.New("second complete")
	uses := 20000
	if testing.Short() {
		uses = 2000
	}
	var first *Request
	counts := make(map[string]int)
	for i := 1; i <= uses; i++ {
		r := pooledRequest(s, nil)
		if first == nil {
			first = r
		}
		delay, twice, mode := rng.IntN(4), rng.IntN(3) == 0, rng.IntN(5)
		start := make(chan struct{})
		var both sync.WaitGroup
		both.Add(1)
		go func() {
			defer both.Done()
			<-start
			switch delay {
			case 1:
				runtime.Gosched()
			case 2:
				for range 50 {
					runtime.Gosched()
				}
			case 3:
				time.Sleep(20 * time.Microsecond)
			}
			r.complete(Status{Count: i}, nil)
		}()
		if twice {
			both.Add(1)
			go func() {
				defer both.Done()
				<-start
				r.complete(Status{Count: -i}, errSecond)
			}()
		}
		close(start)
		var st Status
		var err error
		switch mode {
		case 0: // polled
			for !r.isDone() {
				runtime.Gosched()
			}
			st, err = r.result()
			counts["polled"]++
		case 1: // parked
			st, err = r.block(context.Background())
			counts["parked"]++
		case 2: // parked, its wait cancelled, then on the Done channel (as Cancel does)
			ctx, cancel := context.WithCancel(context.Background())
			if rng.IntN(2) == 0 {
				cancel()
			} else {
				go cancel()
			}
			if st, err = r.block(ctx); errors.Is(err, context.Canceled) {
				counts["cancelled"]++
				<-r.doneChan()
				st, err = r.result()
			} else {
				counts["parked before cancel"]++
			}
			cancel()
		case 3: // on the Done channel
			<-r.doneChan()
			st, err = r.result()
			counts["chan"]++
		case 4: // a Done channel made, then polled (as WaitAll does)
			_ = r.doneChan()
			for !r.isDone() {
				runtime.Gosched()
			}
			st, err = r.result()
			counts["chan, polled"]++
		}
		switch {
		case err == nil && st.Count == i:
		case twice && errors.Is(err, errSecond) && st.Count == -i:
		default:
			t.Fatalf("use %d (mode %d, delay %d, twice %v): got count %d, err %v", i, mode, delay, twice, st.Count, err)
		}
		if !r.isDone() {
			t.Fatalf("use %d: result before completion", i)
		}
		if twice {
			// The loser of the claim must have returned before r is used
			// again: a second complete stands for a failure racing with
			// the completion, and is over by the time its caller lets go
			// of the operation. A single complete is not waited for.
			both.Wait()
		}
		r.release()
	}
	if r := pooledRequest(s, nil); r != first {
		t.Fatal("the session's spare request was not reused")
	}
	t.Logf("waits: %v", counts)
}
