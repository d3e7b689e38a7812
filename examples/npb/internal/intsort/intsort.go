// Package intsort is the kernel of the NAS Parallel Benchmark IS (integer
// sort, NPB 3.x): 2^TotalKeysLog2 keys in [0, 2^MaxKeyLog2) with a roughly
// Gaussian distribution (each key is MaxKey/4 times the sum of four numbers
// of the NPB generator) are ranked ten times; before each ranking two keys
// are changed, and five test keys' ranks are compared with the official
// values (the partial verification). After the last ranking the keys are
// sorted by their ranks and the order is checked (the full verification).
// The benchmark is verified when 5·10 + 1 = 51 checks pass.
//
// [RunSerial] is the reference: the sequential counting sort of is.c.
// [RunRank] is the distributed version, one call per rank over an
// [Exchange] (the collectives of package comm in the program, an in-memory
// exchange in tests): keys are generated in blocks, bucket sizes are summed
// with Allreduce, contiguous bucket ranges are assigned to ranks so that each
// gets about NumKeys/p keys, the keys travel with Alltoall(v), and each rank
// ranks its key range with the count of lesser keys added. Every rank
// reports the same number of passed checks; the details of a failed partial
// check are known to the rank that made it.
package intsort

import (
	"context"
	"errors"
	"fmt"

	"github.com/cohort-mp/cohort/examples/npb/internal/nasrand"
)

// Benchmark constants (is.c).
const (
	Iterations    = 10
	TestArraySize = 5
	// Passes is the number of checks that must pass: the partial
	// verification of 5 keys in each of 10 iterations and the full one.
	Passes = TestArraySize*Iterations + 1
	seed   = uint64(314159265)
)

// Class is a problem size with its official verification values.
type Class struct {
	Name          string
	TotalKeysLog2 int
	MaxKeyLog2    int
	BucketsLog2   int
	TestIndex     [TestArraySize]int // indices of the test keys
	TestRank      [TestArraySize]int // their ranks, before the per-class shift
}

// Classes are S, W, A and B with the test arrays of NPB 3.x.
var Classes = []Class{
	{"S", 16, 11, 9, [5]int{48427, 17148, 23627, 62548, 4431}, [5]int{0, 18, 346, 64917, 65463}},
	{"W", 20, 16, 10, [5]int{357773, 934767, 875723, 898999, 404505}, [5]int{1249, 11698, 1039987, 1043896, 1048018}},
	{"A", 23, 19, 10, [5]int{2112377, 662041, 5336171, 3642833, 4250760}, [5]int{104, 17523, 123928, 8288932, 8388264}},
	{"B", 25, 21, 10, [5]int{41869, 812306, 5102857, 18232239, 26860214}, [5]int{33422937, 10244, 59149, 33135281, 99}},
}

// Errors.
var (
	ErrClass        = errors.New("intsort: unknown class")
	ErrVerification = errors.New("intsort: verification failed")
)

// ClassByName returns the class called name ("S", "W", "A", "B").
func ClassByName(name string) (Class, error) {
	for _, c := range Classes {
		if c.Name == name {
			return c, nil
		}
	}
	return Class{}, fmt.Errorf("%w %q (want S, W, A or B)", ErrClass, name)
}

// NumKeys is the number of keys.
func (c Class) NumKeys() int { return 1 << c.TotalKeysLog2 }

// MaxKey is the exclusive upper bound of the keys.
func (c Class) MaxKey() int { return 1 << c.MaxKeyLog2 }

// NumBuckets is the number of buckets of the distributed version.
func (c Class) NumBuckets() int { return 1 << c.BucketsLog2 }

// ExpectedRank is the official rank of test key i in iteration it (1 … 10):
// the test rank shifted as is.c does for the class.
func (c Class) ExpectedRank(i, it int) int {
	r := c.TestRank[i]
	switch c.Name {
	case "S":
		if i <= 2 {
			return r + it
		}
		return r - it
	case "W":
		if i < 2 {
			return r + it - 2
		}
		return r - it
	case "A":
		if i <= 2 {
			return r + it - 1
		}
		return r - (it - 1)
	case "B":
		if i == 1 || i == 2 || i == 4 {
			return r + it
		}
		return r - it
	}
	return -1
}

// GenerateKeys fills keys with the keys lo, lo+1, … of the class: key i is
// ⌊MaxKey/4 · (r(4i+1) + r(4i+2) + r(4i+3) + r(4i+4))⌋ where r(j) is the j-th
// number of the generator seeded with 314159265 (is.c create_seq).
func GenerateKeys(c Class, lo int, keys []int32) {
	x := nasrand.Skip(seed, nasrand.A, uint64(4*lo))
	k := float64(c.MaxKey() / 4)
	next := func() float64 {
		x = nasrand.Mul(x, nasrand.A)
		return nasrand.Float(x)
	}
	for i := range keys {
		v := next()
		v += next()
		v += next()
		v += next()
		keys[i] = int32(k * v)
	}
}

// Report is the outcome of a run.
type Report struct {
	Passed   int      // checks passed, Passes when verified
	Failures []string // what failed, in order
}

// Err returns nil when every check passed, else an error wrapping
// ErrVerification.
func (r Report) Err() error {
	if r.Passed == Passes && len(r.Failures) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d checks passed %v", ErrVerification, r.Passed, Passes, r.Failures)
}

// RunSerial runs the benchmark on one goroutine (the reference).
func RunSerial(c Class) Report {
	n, maxKey := c.NumKeys(), c.MaxKey()
	keys := make([]int32, n)
	GenerateKeys(c, 0, keys)
	cum := make([]int32, maxKey)
	var rep Report
	for it := 1; it <= Iterations; it++ {
		keys[it] = int32(it)
		keys[it+Iterations] = int32(maxKey - it)
		var pv [TestArraySize]int
		for i, idx := range c.TestIndex {
			pv[i] = int(keys[idx])
		}
		clear(cum)
		for _, k := range keys {
			cum[k]++
		}
		for k := 1; k < maxKey; k++ {
			cum[k] += cum[k-1]
		}
		// cum[k] is the number of keys ≤ k: the rank of key k+1.
		for i, k := range pv {
			if k > 0 && k <= n-1 {
				rep.check(c, i, it, int(cum[k-1]))
			}
		}
	}
	// Full verification: place every key by its rank, check the order.
	sorted := make([]int32, n)
	for _, k := range keys {
		cum[k]--
		sorted[cum[k]] = k
	}
	rep.checkSorted(sorted, 0)
	return rep
}

func (r *Report) check(c Class, i, it, rank int) {
	if want := c.ExpectedRank(i, it); rank == want {
		r.Passed++
	} else {
		r.Failures = append(r.Failures, fmt.Sprintf("iteration %d test key %d: rank %d, want %d", it, i, rank, want))
	}
}

func (r *Report) checkSorted(keys []int32, extraOutOfOrder int) {
	bad := extraOutOfOrder
	for i := 1; i < len(keys); i++ {
		if keys[i-1] > keys[i] {
			bad++
		}
	}
	if bad == 0 {
		r.Passed++
	} else {
		r.Failures = append(r.Failures, fmt.Sprintf("full verification: %d keys out of order", bad))
	}
}

// Exchange is the communication RunRank needs: the collectives of one
// communicator. Every rank calls the same methods in the same order.
type Exchange interface {
	Rank() int
	Size() int
	// AllreduceSum replaces buf on every rank by the element-wise sum of
	// every rank's buf.
	AllreduceSum(ctx context.Context, buf []int64) error
	// Alltoall sends send[j] to rank j and stores in recv[j] what rank j
	// sent here; len(send) = len(recv) = Size.
	Alltoall(ctx context.Context, send, recv []int64) error
	// Alltoallv sends the j-th consecutive block of send (sendCounts[j]
	// keys) to rank j and stores the blocks received, in rank order, in
	// recv (recvCounts[j] keys from rank j).
	Alltoallv(ctx context.Context, send []int32, sendCounts []int, recv []int32, recvCounts []int) error
}

// bucketOwners assigns contiguous bucket ranges to p ranks so that rank j
// gets the buckets [start[j], start[j+1]) and about NumKeys/p keys. Every
// rank computes the same assignment from the global bucket sizes.
func bucketOwners(sizes []int64, p int, total int64) []int {
	start := make([]int, p+1)
	j, acc := 0, int64(0)
	for b, s := range sizes {
		// Move to the next rank once this one has its share.
		for j < p-1 && acc >= total*int64(j+1)/int64(p) {
			j++
			start[j] = b
		}
		acc += s
	}
	for j++; j <= p; j++ {
		start[j] = len(sizes)
	}
	return start
}

// RunRank runs the benchmark as rank ex.Rank() of ex.Size(). Every rank
// returns the same Passed count; Failures lists the global failure counts
// and the failed checks made on this rank.
func RunRank(ctx context.Context, ex Exchange, c Class) (Report, error) {
	p, r := ex.Size(), ex.Rank()
	n, maxKey, nb := c.NumKeys(), c.MaxKey(), c.NumBuckets()
	shift := c.MaxKeyLog2 - c.BucketsLog2
	width := 1 << shift
	lo, hi := r*n/p, (r+1)*n/p
	keys := make([]int32, hi-lo)
	GenerateKeys(c, lo, keys)

	bucketed := make([]int32, len(keys))
	localSizes := make([]int64, nb)
	globalSizes := make([]int64, nb)
	sendCounts, recvCounts := make([]int, p), make([]int, p)
	send64, recv64 := make([]int64, p), make([]int64, p)
	var recv []int32
	var cum []int32
	var minKey, lesser int
	passed, failedChecks := int64(0), int64(0)
	var failures []string

	for it := 1; it <= Iterations; it++ {
		if it >= lo && it < hi {
			keys[it-lo] = int32(it)
		}
		if it+Iterations >= lo && it+Iterations < hi {
			keys[it+Iterations-lo] = int32(maxKey - it)
		}
		// The test keys' values, from their owners.
		pv := make([]int64, TestArraySize)
		for i, idx := range c.TestIndex {
			if idx >= lo && idx < hi {
				pv[i] = int64(keys[idx-lo])
			}
		}
		if err := ex.AllreduceSum(ctx, pv); err != nil {
			return Report{}, fmt.Errorf("intsort: iteration %d test keys: %w", it, err)
		}

		// Bucket sizes, local and global; the owners of the buckets.
		clear(localSizes)
		for _, k := range keys {
			localSizes[k>>shift]++
		}
		copy(globalSizes, localSizes)
		if err := ex.AllreduceSum(ctx, globalSizes); err != nil {
			return Report{}, fmt.Errorf("intsort: iteration %d bucket sizes: %w", it, err)
		}
		owners := bucketOwners(globalSizes, p, int64(n))

		// Local bucket sort: the keys for rank j are then consecutive.
		ptr := make([]int64, nb)
		for b := 1; b < nb; b++ {
			ptr[b] = ptr[b-1] + localSizes[b-1]
		}
		for _, k := range keys {
			b := k >> shift
			bucketed[ptr[b]] = k
			ptr[b]++
		}
		for j := range p {
			var s int64
			for b := owners[j]; b < owners[j+1]; b++ {
				s += localSizes[b]
			}
			sendCounts[j] = int(s)
			send64[j] = s
		}
		if err := ex.Alltoall(ctx, send64, recv64); err != nil {
			return Report{}, fmt.Errorf("intsort: iteration %d counts: %w", it, err)
		}
		total := 0
		for j := range p {
			recvCounts[j] = int(recv64[j])
			total += recvCounts[j]
		}
		if cap(recv) < total {
			recv = make([]int32, total)
		}
		recv = recv[:total]
		if err := ex.Alltoallv(ctx, bucketed, sendCounts, recv, recvCounts); err != nil {
			return Report{}, fmt.Errorf("intsort: iteration %d keys: %w", it, err)
		}

		// Rank the keys of this rank's range [minKey, maxKeyHere).
		minKey = owners[r] * width
		maxHere := owners[r+1] * width
		lesser = 0
		for b := 0; b < owners[r]; b++ {
			lesser += int(globalSizes[b])
		}
		if cap(cum) < maxHere-minKey {
			cum = make([]int32, maxHere-minKey)
		}
		cum = cum[:maxHere-minKey]
		clear(cum)
		for _, k := range recv {
			if int(k) < minKey || int(k) >= maxHere {
				return Report{}, fmt.Errorf("intsort: key %d outside this rank's range [%d, %d)", k, minKey, maxHere)
			}
			cum[int(k)-minKey]++
		}
		for k := 1; k < len(cum); k++ {
			cum[k] += cum[k-1]
		}
		for i, k := range pv {
			if k > 0 && k <= int64(n-1) && int(k-1) >= minKey && int(k-1) < maxHere {
				rank := int(cum[int(k-1)-minKey]) + lesser
				if want := c.ExpectedRank(i, it); rank == want {
					passed++
				} else {
					failedChecks++
					failures = append(failures, fmt.Sprintf("iteration %d test key %d: rank %d, want %d", it, i, rank, want))
				}
			}
		}
	}

	// Full verification: sort this rank's keys by rank, check the local
	// order, the order across rank boundaries and that no key was lost.
	sorted := make([]int32, len(recv))
	for _, k := range recv {
		idx := int(k) - minKey
		cum[idx]--
		sorted[cum[idx]] = k
	}
	outOfOrder := 0
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1] > sorted[i] {
			outOfOrder++
		}
	}
	// Slots: [0] out of order, [1] keys held, [2] passed, [3] failed,
	// then first and last key (+1, 0 for none) of every rank.
	g := make([]int64, 4+2*p)
	g[0], g[1], g[2], g[3] = int64(outOfOrder), int64(len(sorted)), passed, failedChecks
	if len(sorted) > 0 {
		g[4+2*r] = int64(sorted[0]) + 1
		g[5+2*r] = int64(sorted[len(sorted)-1]) + 1
	}
	if err := ex.AllreduceSum(ctx, g); err != nil {
		return Report{}, fmt.Errorf("intsort: full verification: %w", err)
	}
	prevLast := int64(0)
	for j := range p {
		first, last := g[4+2*j], g[5+2*j]
		if first == 0 {
			continue
		}
		if first < prevLast {
			g[0]++
		}
		prevLast = last
	}
	rep := Report{Passed: int(g[2])}
	if g[3] > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d partial verifications failed", g[3]))
		rep.Failures = append(rep.Failures, failures...)
	}
	switch {
	case g[1] != int64(n):
		rep.Failures = append(rep.Failures, fmt.Sprintf("full verification: %d keys after the exchange, want %d", g[1], n))
	case g[0] != 0:
		rep.Failures = append(rep.Failures, fmt.Sprintf("full verification: %d keys out of order", g[0]))
	default:
		rep.Passed++
	}
	return rep, nil
}
