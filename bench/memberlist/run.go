package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// params are one run's settings.
type params struct {
	sizes   []int
	rates   []float64
	systems []string
	trials  int
	quiet   time.Duration
	warmup  time.Duration
	limit   time.Duration // per crash trial
	seed    uint64
	faults  bool
}

// result is one configuration's measurements.
type result struct {
	system string
	rate   float64
	n      int
	err    string

	msgsPerSec  float64 // per member, quiet window
	bytesPerSec float64 // per member, quiet window
	cpuCores    float64 // process CPU seconds per second, quiet window
	falseQuiet  int     // nodes declared failed while alive, quiet window
	falseTotal  int     // the same over the whole configuration
	detect      []time.Duration
	agree       []time.Duration
	timeouts    int // trials whose crash was not agreed on within the limit

	// The faults window (params.faults): one member loses 5% of its
	// outgoing messages and delays the rest by 200 ms for a quiet window.
	faultsRun   bool
	falseFaults int // members declared failed while alive in that window
}

func newSystem(name string, rate float64, seed uint64) (system, error) {
	switch name {
	case "heartbeat":
		return newCohortSystem(group.DetectorHeartbeat, rate, seed), nil
	case "brr":
		return newCohortSystem(group.DetectorBRR, rate, seed), nil
	case "memberlist":
		return newMLSystem(rate, seed), nil
	}
	return nil, fmt.Errorf("unknown system %q (want heartbeat, brr or memberlist)", name)
}

// runOne measures one system at one size and rate; progress goes to log.
func runOne(p params, name string, rate float64, n int, log io.Writer) result {
	r := result{system: name, rate: rate, n: n}
	seed := p.seed ^ uint64(n)<<8 ^ uint64(rate*10)
	rng := rand.New(rand.NewPCG(seed, 1))
	s, err := newSystem(name, rate, seed)
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer func() {
		s.close()
		runtime.GC()
	}()
	t0 := time.Now()
	if err := s.start(n); err != nil {
		r.err = fmt.Sprintf("start: %v", err)
		return r
	}
	fmt.Fprintf(log, "  %s n=%d rate=%g: %d nodes agreed in %v\n", name, n, rate, n, time.Since(t0).Round(time.Millisecond))
	time.Sleep(max(p.warmup, s.settle())) // a measurement window, not a wait for a condition

	// The quiet window: traffic, CPU and false deaths with nothing failing.
	u0, f0 := readUsage(), s.falseDeaths()
	m0, b0 := s.traffic()
	w0 := time.Now()
	time.Sleep(p.quiet)
	m1, b1 := s.traffic()
	u1, f1 := readUsage(), s.falseDeaths()
	w := time.Since(w0).Seconds()
	r.msgsPerSec = float64(m1-m0) / w / float64(n)
	r.bytesPerSec = float64(b1-b0) / w / float64(n)
	r.cpuCores = (u1.cpu - u0.cpu).Seconds() / w
	r.falseQuiet = f1 - f0
	fmt.Fprintf(log, "  %s n=%d rate=%g: quiet %.0fs: %.2f msgs/s, %.0f B/s per member, cpu %.2f cores, %d false deaths\n",
		name, n, rate, w, r.msgsPerSec, r.bytesPerSec, r.cpuCores, r.falseQuiet)

	// Crash trials: one member per trial, replaced afterwards so that every
	// trial starts at n.
	for t := 0; t < p.trials; t++ {
		if s.live() != n {
			if err := s.replace(); err != nil {
				r.err = fmt.Sprintf("trial %d: replace: %v", t, err)
				break
			}
		}
		i := rng.IntN(n)
		start := time.Now()
		victim := s.crash(i)
		var agreedAt time.Time
		err := waitFor(s, p.limit, func() bool {
			ok, at := s.agreed(victim)
			agreedAt = at
			return ok
		})
		if err != nil {
			r.timeouts++
			fmt.Fprintf(log, "  %s n=%d rate=%g trial %d: crash of %s not agreed: %v\n", name, n, rate, t, victim, err)
			if err := s.replace(); err != nil { // the live ones must still agree
				r.err = fmt.Sprintf("trial %d: after timeout: %v", t, err)
				break
			}
			continue
		}
		d := s.detected(victim).Sub(start)
		a := agreedAt.Sub(start)
		r.detect = append(r.detect, d)
		r.agree = append(r.agree, a)
		fmt.Fprintf(log, "  %s n=%d rate=%g trial %d: crash of %s: first detection %v, all agreed %v\n",
			name, n, rate, t, victim, d.Round(time.Millisecond), a.Round(time.Millisecond))
	}
	if p.faults && r.err == "" {
		faultWindow(p, s, &r, rng, log)
	}
	r.falseTotal = s.falseDeaths()
	return r
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// faultWindow makes one live member lose 5% of its outgoing messages and
// delay the rest by 200 ms for a quiet window, and counts false deaths.
func faultWindow(p params, s system, r *result, rng *rand.Rand, log io.Writer) {
	if s.live() != r.n {
		if err := s.replace(); err != nil {
			r.err = fmt.Sprintf("faults: replace: %v", err)
			return
		}
	}
	i := rng.IntN(r.n)
	if !s.inject(i, 0.05, 200*time.Millisecond) {
		fmt.Fprintf(log, "  %s n=%d rate=%g: no fault injection for this system\n", r.system, r.n, r.rate)
		return
	}
	f0 := s.falseDeaths()
	time.Sleep(p.quiet) // a measurement window
	s.inject(i, 0, 0)
	r.faultsRun = true
	r.falseFaults = s.falseDeaths() - f0
	fmt.Fprintf(log, "  %s n=%d rate=%g: %v with 5%% loss and 200 ms delay on one member: %d false deaths\n",
		r.system, r.n, r.rate, p.quiet, r.falseFaults)
}
