package livedemo

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// userHz is the unit of /proc/stat's counters: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHz = 100

// cpuSample is the machine's processor time so far: busy (user, nice,
// system, interrupts) and steal (time the hypervisor gave the machine's
// virtual processors to other guests).
type cpuSample struct {
	busy, steal time.Duration
	ok          bool
}

// sampleCPU reads the machine's processor time (Linux; elsewhere ok is
// false).
func sampleCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the "cpu" line of /proc/stat: user nice system idle
// iowait irq softirq steal …, in USER_HZ ticks.
func parseProcStat(s string) cpuSample {
	line, _, _ := strings.Cut(s, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}
	}
	var t [8]int64
	for i := range t {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return cpuSample{}
		}
		t[i] = v
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * time.Second / userHz }
	busy := t[0] + t[1] + t[2] + t[5] + t[6]
	return cpuSample{busy: tick(busy), steal: tick(t[7]), ok: true}
}

// machineLoad is what the rest of the machine took from a run: the
// processor time of other processes (every busy tick that was not the
// ranks'), the time stolen by the hypervisor, on how many cores, over how
// long.
type machineLoad struct {
	others, steal time.Duration
	wall          time.Duration
	cores         int
	ok            bool
}

// loadOf is the load of a run between samples a and b, the ranks having
// used ranksCPU.
func loadOf(a, b cpuSample, ranksCPU, wall time.Duration) machineLoad {
	if !a.ok || !b.ok {
		return machineLoad{}
	}
	return machineLoad{others: max(0, b.busy-a.busy-ranksCPU), steal: b.steal - a.steal, wall: wall, cores: runtime.NumCPU(), ok: true}
}

// share is the fraction of the cores' time over the run taken by other
// processes and by the hypervisor.
func (l machineLoad) share() float64 {
	if !l.ok || l.wall <= 0 || l.cores <= 0 {
		return 0
	}
	return float64(l.others+l.steal) / (float64(l.wall) * float64(l.cores))
}

// sharedShare is the share of the cores taken from the ranks above which
// the summary says the machine was shared: scheduling noise and the demo's
// own display stay well below it.
const sharedShare = 0.10

// loadNote says, when the machine was shared during either run, how much
// other processes (and the hypervisor) took, in lines: that time counts in
// the time lost to recovery. It is nil when neither run was shared.
func loadNote(base, run machineLoad) []string {
	if base.share() < sharedShare && run.share() < sharedShare {
		return nil
	}
	steal := ""
	if run.steal > 0 || base.steal > 0 {
		steal = fmt.Sprintf(", the hypervisor %.1f s and %.1f s", run.steal.Seconds(), base.steal.Seconds())
	}
	return []string{
		fmt.Sprintf("(the machine was shared: other processes used %.1f s of processor time during the run with kills and %.1f s", run.others.Seconds(), base.others.Seconds()),
		fmt.Sprintf(" during the failure-free one%s, on %d cores; the time they took from the ranks counts as lost to recovery)", steal, run.cores),
	}
}
