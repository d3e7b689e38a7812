package intsort

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// NPB 3.x IS class S: the partial verification of the five test keys in
// each of ten iterations and the full verification pass (51 checks).
func TestSerialClassS(t *testing.T) {
	c, _ := ClassByName("S")
	rep := RunSerial(c)
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestSerialClassW(t *testing.T) {
	if testing.Short() {
		t.Skip("class W ranks 2^20 keys ten times")
	}
	c, _ := ClassByName("W")
	if err := RunSerial(c).Err(); err != nil {
		t.Fatal(err)
	}
}

// A class whose test ranks are wrong fails the partial verification: the
// checks are not vacuous.
func TestSerialDetectsWrongRanks(t *testing.T) {
	c, _ := ClassByName("S")
	c.TestRank[2]++
	rep := RunSerial(c)
	if err := rep.Err(); !errors.Is(err, ErrVerification) {
		t.Fatalf("wrong test ranks verified: %+v", rep)
	}
	if rep.Passed != Passes-Iterations {
		t.Fatalf("passed %d, want %d (one key wrong in every iteration)", rep.Passed, Passes-Iterations)
	}
}

func TestGenerateKeysBlocks(t *testing.T) {
	c, _ := ClassByName("S")
	all := make([]int32, c.NumKeys())
	GenerateKeys(c, 0, all)
	part := make([]int32, 1000)
	GenerateKeys(c, 31337, part)
	for i, k := range part {
		if all[31337+i] != k {
			t.Fatalf("key %d: block generation %d, whole %d", 31337+i, k, all[31337+i])
		}
	}
	for i, k := range all {
		if k < 0 || int(k) >= c.MaxKey() {
			t.Fatalf("key %d = %d outside [0, %d)", i, k, c.MaxKey())
		}
	}
}

// memWorld is an in-memory Exchange for p goroutines: every collective
// deposits each rank's contribution and waits for all of them.
type memWorld struct {
	p     int
	mu    sync.Mutex
	cond  *sync.Cond
	gen   int
	count int
	slots []any
	snap  []any
}

func newMemWorld(p int) *memWorld {
	w := &memWorld{p: p, slots: make([]any, p)}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// exchange publishes v for rank r and returns every rank's value.
func (w *memWorld) exchange(r int, v any) []any {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.slots[r] = v
	w.count++
	gen := w.gen
	if w.count == w.p {
		w.snap = append([]any(nil), w.slots...)
		w.count = 0
		w.gen++
		w.cond.Broadcast()
	} else {
		for gen == w.gen {
			w.cond.Wait()
		}
	}
	return w.snap
}

type memRank struct {
	w *memWorld
	r int
}

func (m memRank) Rank() int { return m.r }
func (m memRank) Size() int { return m.w.p }

func (m memRank) AllreduceSum(_ context.Context, buf []int64) error {
	all := m.w.exchange(m.r, append([]int64(nil), buf...))
	clear(buf)
	for _, v := range all {
		for i, x := range v.([]int64) {
			buf[i] += x
		}
	}
	return nil
}

func (m memRank) Alltoall(_ context.Context, send, recv []int64) error {
	all := m.w.exchange(m.r, append([]int64(nil), send...))
	for j, v := range all {
		recv[j] = v.([]int64)[m.r]
	}
	return nil
}

type block struct {
	data   []int32
	counts []int
}

func (m memRank) Alltoallv(_ context.Context, send []int32, sendCounts []int, recv []int32, recvCounts []int) error {
	all := m.w.exchange(m.r, block{append([]int32(nil), send...), append([]int(nil), sendCounts...)})
	off := 0
	for j, v := range all {
		b := v.(block)
		start := 0
		for x := 0; x < m.r; x++ {
			start += b.counts[x]
		}
		if b.counts[m.r] != recvCounts[j] {
			return fmt.Errorf("rank %d sends %d keys, rank %d expects %d", j, b.counts[m.r], m.r, recvCounts[j])
		}
		copy(recv[off:], b.data[start:start+b.counts[m.r]])
		off += recvCounts[j]
	}
	return nil
}

func runRanks(t *testing.T, c Class, p int) []Report {
	t.Helper()
	w := newMemWorld(p)
	reps := make([]Report, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() { reps[r], errs[r] = RunRank(context.Background(), memRank{w, r}, c) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return reps
}

// The distributed version (bucketed key exchange with Alltoall/Alltoallv)
// verifies class S on 1 … 8 ranks, including sizes that do not divide the
// number of keys.
func TestDistributedClassS(t *testing.T) {
	c, _ := ClassByName("S")
	for _, p := range []int{1, 2, 3, 4, 7, 8} {
		for r, rep := range runRanks(t, c, p) {
			if err := rep.Err(); err != nil {
				t.Fatalf("p=%d rank %d: %v", p, r, err)
			}
		}
	}
}

func TestDistributedClassW(t *testing.T) {
	if testing.Short() {
		t.Skip("class W exchanges 2^20 keys ten times")
	}
	c, _ := ClassByName("W")
	for r, rep := range runRanks(t, c, 5) {
		if err := rep.Err(); err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

func TestDistributedDetectsWrongRanks(t *testing.T) {
	c, _ := ClassByName("S")
	c.TestRank[4] -= 3
	for _, rep := range runRanks(t, c, 4) {
		if err := rep.Err(); !errors.Is(err, ErrVerification) || rep.Passed != Passes-Iterations {
			t.Fatalf("wrong test ranks: passed %d, err %v", rep.Passed, err)
		}
	}
}

func TestBucketOwners(t *testing.T) {
	sizes := []int64{5, 0, 0, 10, 1, 1, 1, 2}
	start := bucketOwners(sizes, 3, 20)
	if start[0] != 0 || start[3] != len(sizes) {
		t.Fatalf("owners %v do not cover the buckets", start)
	}
	for j := 0; j < 3; j++ {
		if start[j] > start[j+1] {
			t.Fatalf("owners %v not monotonic", start)
		}
	}
	// More ranks than buckets: the extra ranks get nothing.
	start = bucketOwners([]int64{3, 3}, 5, 6)
	if start[5] != 2 || start[0] != 0 {
		t.Fatalf("owners %v", start)
	}
}

func TestClassByName(t *testing.T) {
	if _, err := ClassByName("E"); !errors.Is(err, ErrClass) {
		t.Errorf("ClassByName(E) error %v", err)
	}
}

// BenchmarkSerial runs whole classes; class A is verified here only.
func BenchmarkSerial(b *testing.B) {
	for _, name := range []string{"S", "W", "A"} {
		c, _ := ClassByName(name)
		b.Run("class="+name, func(b *testing.B) {
			for b.Loop() {
				if err := RunSerial(c).Err(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
