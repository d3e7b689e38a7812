package submit

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/launch"
	"github.com/cohort-mp/cohort/p2p/daemon"
	"github.com/cohort-mp/cohort/p2p/place"
)

// Restarts (Config.Respawn), as package launch does them for a job on one
// machine: a process that a signal ends once the job has started, or that
// is lost with its host, is started again as a newcomer, a new process
// with the next free number from N+Spares on (a failed number is never
// used again), which registers late at the job's rendezvous proving the
// job secret, asks the membership to admit it, and waits as a spare until
// the program adds it (package resil).
//
// Where: on the dead process's host when its daemon's launch stream is
// still up, else on another host of the job with a free slot of its
// reservation (the daemon refuses more processes of the job at once than
// it reserved), chosen by the job's strategy: spread takes the host
// running the fewest of the job's processes, concentrate the closest. A
// host that refuses is passed over for the next.
//
// Bounds: each process of the start is started again at most Respawn
// times, counting the deaths of its restarts, and the job takes at most
// launch.MaxNewcomers numbers (a number is used up once the rendezvous
// expects it, even if no host could start it). No restart once a process
// exited with status 0 (the program's run is over), nor once the job is
// stopping. Restarts still running idleNewcomerWait after every process
// of the start ended, and the program ended in one of them or in a
// restart that joined, were never needed: their hosts' streams are
// closed, which stops them, and their exits, marked Idle, do not fail
// the job. While every process of the start died by a signal or with
// its host, the restarts are the job, and none is stopped.

// idleNewcomerWait is how long restarts may run on after every process of
// the job's start has ended, before they are stopped as idle (as package
// launch's: a restart that holds a rank ends with the others).
const idleNewcomerWait = 10 * time.Second

// hostRun is a host of the running job, for its restarts.
type hostRun struct {
	g       grant
	listen  string // the host's address, where its processes listen
	dialOut bool
	up      bool // its launch stream runs
	alive   int  // processes of the job running there (as far as known)
}

// restarter starts the job's processes again; its fields are guarded by
// mu, which is also the guard of the job's exits.
type restarter struct {
	cfg     *Config
	ctx     context.Context
	mu      *sync.Mutex
	exits   *[]Exit
	procs   int        // the processes of the start
	hosts   []*hostRun // in latency order
	clients map[string]*daemon.Client
	rz      *launch.Rendezvous
	boot    launch.Bootstrap   // the job's, without Rank, Listen, DialOutOnly
	wg      *sync.WaitGroup    // Run waits for the restarts in flight
	stop    context.CancelFunc // closes every launch stream (idle restarts)

	next      int         // newcomers' numbers taken
	of        map[int]int // process of the start → times started again
	finished  bool        // a process exited with status 0
	startLeft int         // processes of the start not known to have ended
	// ended: the program ended somewhere, a process of the start or a
	// restart that joined exiting on its own (not by a signal); until
	// then the restarts may be what runs the job.
	ended    bool
	idleOnce sync.Once
	over     bool // Run has every stream's end: the exits are its own
}

func (rs *restarter) host(name string) *hostRun {
	for _, h := range rs.hosts {
		if h.g.host.Name == name {
			return h
		}
	}
	return nil
}

// started reports whether the rendezvous gave every process its table:
// restarts join a running job only.
func (rs *restarter) started() bool {
	select {
	case <-rs.rz.Done():
	default:
		return false
	}
	_, err := rs.rz.Wait(context.Background())
	return err == nil
}

// exited notes the end of process p on its host (rs.mu held) and, if it
// is to be started again, does so in the background.
func (rs *restarter) exitedLocked(p int, x Exit) {
	if h := rs.host(x.Host); h != nil {
		h.alive--
	}
	if x.OK() {
		rs.finished = true
	}
	if x.Signal == "" && x.Err == "" && (p < rs.procs || slices.Contains(rs.rz.Joined(), p)) {
		rs.ended = true
	}
	if p < rs.procs {
		rs.startLeft--
	}
	rs.idleCheckLocked()
	if x.Signal != "" && !x.Idle {
		rs.againLocked(p, x, "ended ("+x.How()+")")
	}
}

// hostLost notes that host's stream ended (rs.mu held) and starts again
// elsewhere the processes it held that had not ended.
func (rs *restarter) hostLostLocked(name string) {
	h := rs.host(name)
	if h == nil {
		return
	}
	h.up, h.alive = false, 0
	for p, x := range *rs.exits {
		if x.Host != name || !x.Lost || x.Idle {
			continue
		}
		if p < rs.procs {
			rs.startLeft--
		}
		rs.againLocked(p, x, "lost with host "+name)
	}
	rs.idleCheckLocked()
}

// againLocked starts process p again, if the bounds allow, in the
// background; why says how p ended.
func (rs *restarter) againLocked(p int, x Exit, why string) {
	if rs.cfg.Respawn <= 0 || rs.ctx.Err() != nil || rs.finished || !rs.started() {
		return
	}
	of := x.Of
	who := fmt.Sprintf("process %d", p)
	if of != p {
		who = fmt.Sprintf("process %d (process %d started again)", p, of)
	}
	if n := rs.of[of]; n >= rs.cfg.Respawn {
		rs.cfg.Log("%s %s; not starting it again: process %d was started again %d time(s), the limit", who, why, of, n)
		return
	}
	if rs.next >= launch.MaxNewcomers {
		rs.cfg.Log("%s %s; not starting it again: the job had %d restarts, the most it can", who, why, launch.MaxNewcomers)
		return
	}
	num := rs.procs + rs.next
	rs.next++
	if err := rs.rz.Expect(num); err != nil {
		rs.cfg.Log("%s %s; starting it again as process %d failed: %v; the job goes on with the spares it has", who, why, num, err)
		return
	}
	rs.of[of]++
	(*rs.exits)[p].Replaced = num
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		rs.spawn(p, num, of, x.Host, who, why)
	}()
}

// candidates lists the hosts to ask for a restart of a process of
// former, in order: former itself while its stream is up, then the hosts
// with a free slot by the job's strategy. rs.mu is held.
func (rs *restarter) candidatesLocked(former string) []*hostRun {
	var out, others []*hostRun
	for _, h := range rs.hosts {
		switch {
		case !h.up:
		case h.g.host.Name == former:
			out = append(out, h)
		case h.alive < h.g.procs:
			others = append(others, h)
		}
	}
	if rs.cfg.Strategy == place.Spread {
		slices.SortStableFunc(others, func(a, b *hostRun) int { return a.alive - b.alive })
	}
	return append(out, others...)
}

// spawn asks the candidate hosts in turn to start process num in the
// place of process p, which stands for process of of the start.
func (rs *restarter) spawn(p, num, of int, former, who, why string) {
	rs.mu.Lock()
	hosts := rs.candidatesLocked(former)
	rs.mu.Unlock()
	var refusals []string
	for _, h := range hosts {
		boot := rs.boot
		boot.Rank, boot.Newcomer, boot.Listen = num, true, h.listen
		boot.DialOutOnly = h.dialOut
		rs.mu.Lock()
		// Set before the request: the process's events may come first.
		rs.setExitLocked(num, Exit{Rank: num, Host: h.g.host.Name, Lost: true, Of: of})
		h.alive++
		rs.mu.Unlock()
		ctx, cancel := context.WithTimeout(rs.ctx, 10*time.Second)
		err := rs.clients[h.g.host.Name].Spawn(ctx, h.g.token, daemon.LaunchRank{Rank: num, Env: boot.Environ()})
		cancel()
		if err == nil {
			rs.cfg.Log("%s %s; started it again as process %d on %s, which joins the job as a spare", who, why, num, h.g.host.Name)
			return
		}
		rs.mu.Lock()
		h.alive--
		(*rs.exits)[num].Host = ""
		rs.mu.Unlock()
		refusals = append(refusals, err.Error())
	}
	rs.mu.Lock()
	(*rs.exits)[num] = Exit{Rank: num, Of: of, Err: "no host started it"}
	(*rs.exits)[p].Replaced = 0
	rs.mu.Unlock()
	if len(refusals) == 0 {
		refusals = append(refusals, "no host of the job has a free slot")
	}
	rs.cfg.Log("%s %s; starting it again as process %d failed: %s; the job goes on with the spares it has", who, why, num, joinReasons(refusals))
}

// setExitLocked records x as process p's, growing the exits as needed.
func (rs *restarter) setExitLocked(p int, x Exit) {
	for len(*rs.exits) <= p {
		*rs.exits = append(*rs.exits, Exit{Rank: len(*rs.exits), Of: len(*rs.exits)})
	}
	(*rs.exits)[p] = x
}

// idleCheckLocked starts the wait after which restarts still running are
// stopped, once every process of the start has ended and the program
// ended somewhere: when every process of the start died, the restarts
// that took their ranks run the job, and are not idle.
func (rs *restarter) idleCheckLocked() {
	if rs.cfg.Respawn <= 0 || rs.startLeft > 0 || !rs.ended {
		return
	}
	rs.idleOnce.Do(func() {
		// Not one of Run's waits: a job without restarts left running
		// ends when its streams do.
		go func() {
			t := time.NewTimer(idleNewcomerWait)
			defer t.Stop()
			select {
			case <-t.C:
			case <-rs.ctx.Done():
				return
			}
			rs.mu.Lock()
			if rs.over {
				rs.mu.Unlock()
				return
			}
			var idle []int
			for p := rs.procs; p < len(*rs.exits); p++ {
				if x := &(*rs.exits)[p]; x.Lost && x.Host != "" {
					x.Idle = true
					idle = append(idle, p)
				}
			}
			rs.mu.Unlock()
			if len(idle) == 0 {
				return
			}
			for _, p := range idle {
				rs.cfg.Log("stopping process %d: every process of the job's start has ended, and the job never needed it", p)
			}
			rs.stop()
		}()
	})
}

// listenHost is the host part of a daemon's address: its processes
// listen there.
func listenHost(addr string) string {
	h, _, _ := net.SplitHostPort(addr)
	return h
}

func joinReasons(rs []string) string {
	out := rs[0]
	for _, r := range rs[1:] {
		out += "; " + r
	}
	return out
}
