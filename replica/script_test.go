package replica

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
)

// Scripted tests: every process of a small job is a Layer on a manual
// Env, and the test moves the messages by hand (all, or only some, and
// drops those of a crashed process), so each case of the protocol of
// P2P-MPI §4.2 — and of this package's deviations — is played exactly.

type flight struct {
	from, to core.NodeID
	m        core.Msg
}

type cluster struct {
	t      *testing.T
	lay    Layout
	envs   []*coretest.Env
	ls     []*Layer
	dead   []bool
	wire   []flight
	epoch  uint64
	events [][]string // per process, since the last take
}

func newCluster(t *testing.T, ranks, replicas, ackEvery int) *cluster {
	t.Helper()
	return newClusterWith(t, ranks, replicas, func(cfg *Config) { cfg.AckEvery = ackEvery })
}

// newClusterWith is newCluster with the default configuration edited by
// edit.
func newClusterWith(t *testing.T, ranks, replicas int, edit func(*Config)) *cluster {
	t.Helper()
	lay := Layout{Ranks: ranks, Replicas: replicas}
	cfg := DefaultConfig(lay)
	edit(&cfg)
	c := &cluster{t: t, lay: lay, epoch: 1}
	for p := range lay.Size() {
		l, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		env := coretest.NewEnv(core.NodeID(p), 1)
		l.Start(env)
		c.envs = append(c.envs, env)
		c.ls = append(c.ls, l)
	}
	c.dead = make([]bool, lay.Size())
	c.events = make([][]string, lay.Size())
	return c
}

// collect moves what the processes sent onto the wire and records their
// events.
func (c *cluster) collect() {
	for p, env := range c.envs {
		for _, s := range env.TakeSent() {
			c.wire = append(c.wire, flight{from: core.NodeID(p), to: s.To, m: s.Msg})
		}
		for _, e := range env.TakeEmitted() {
			var s string
			switch x := e.(type) {
			case Delivered:
				s = fmt.Sprintf("deliver c%d %d#%d %q", x.Comm, x.Src, x.Seq, x.Payload)
			case Decided:
				s = fmt.Sprintf("decided %d %q", x.K, x.Value)
			case RankFailed:
				s = fmt.Sprintf("rank %d failed", x.Rank)
			case ReplicaLost:
				s = fmt.Sprintf("lost %v of rank %d", x.Phys, x.Rank)
			default:
				s = fmt.Sprintf("%T", e)
			}
			c.events[p] = append(c.events[p], s)
		}
	}
}

func (c *cluster) send(p int, dst int, payload string) {
	c.ls[p].SendMsg(7, dst, 3, []byte(payload))
	c.collect()
}

func (c *cluster) decide(p int, k uint64, v string) {
	c.ls[p].Decide(k, []byte(v))
	c.collect()
}

// deliver hands over, in order, every message in flight that keep
// accepts, and the messages those cause, until none is left.
func (c *cluster) deliver(keep func(f flight) bool) {
	for {
		i := slices.IndexFunc(c.wire, keep)
		if i < 0 {
			return
		}
		f := c.wire[i]
		c.wire = slices.Delete(c.wire, i, i+1)
		if !c.dead[f.to] {
			c.ls[f.to].Receive(f.from, f.m)
		}
		c.collect()
	}
}

func (c *cluster) all() { c.deliver(func(flight) bool { return true }) }

// pending lists the messages in flight as "from→to msg".
func (c *cluster) pending() []string {
	var out []string
	for _, f := range c.wire {
		out = append(out, fmt.Sprintf("%v→%v %v", f.from, f.to, f.m))
	}
	return out
}

// crash kills the processes: what they have in flight is lost, and the
// rest install a view without them.
func (c *cluster) crash(ps ...int) {
	for _, p := range ps {
		c.dead[p] = true
	}
	c.wire = slices.DeleteFunc(c.wire, func(f flight) bool { return c.dead[f.from] || c.dead[f.to] })
	c.epoch++
	var members []core.NodeID
	for p := range c.ls {
		if !c.dead[p] {
			members = append(members, core.NodeID(p))
		}
	}
	for p, l := range c.ls {
		if !c.dead[p] {
			l.Handle(core.MembersChanged{Epoch: c.epoch, Members: members})
		}
	}
	c.collect()
}

// advance moves every clock by d, firing the timers.
func (c *cluster) advance(d time.Duration) {
	for p, env := range c.envs {
		if !c.dead[p] {
			env.Advance(d, c.ls[p])
		}
	}
	c.collect()
}

func (c *cluster) take(p int) []string {
	e := c.events[p]
	c.events[p] = nil
	return e
}

func (c *cluster) want(what string, got []string, want ...string) {
	c.t.Helper()
	if !slices.Equal(got, want) {
		c.t.Fatalf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}

func (c *cluster) backup(p int) int { return c.ls[p].Stats().Backup }

// TestLayout: physical ids are replica-major (p2p/place's order).
func TestLayout(t *testing.T) {
	lay := Layout{Ranks: 3, Replicas: 2}
	for p := range core.NodeID(6) {
		if lay.Phys(lay.Rank(p), lay.Replica(p)) != p {
			t.Fatalf("phys(rank(%v), replica(%v)) = %v", p, p, lay.Phys(lay.Rank(p), lay.Replica(p)))
		}
	}
	if lay.Phys(1, 1) != 4 || lay.Rank(5) != 2 || lay.Replica(5) != 1 || lay.Contains(6) {
		t.Fatal("layout of 3×2 is not replica-major")
	}
}

// TestSendAckCommit (§4.2, sending agreement, with the commit after the
// receivers' acknowledgements): the master sends to every replica of the
// destination; the non-master keeps the send in its backup table; the
// receivers deliver and acknowledge to the master; the master commits and
// the non-master drops its backup entry.
func TestSendAckCommit(t *testing.T) {
	c := newCluster(t, 2, 2, 32) // rank 0: n0 (master), n2; rank 1: n1, n3
	c.send(0, 1, "m1")
	c.send(2, 1, "m1")
	c.want("master sends to both replicas of rank 1", c.pending(), "n0→n1 data{c7 0→1 tag 3 #1 2B}", "n0→n3 data{c7 0→1 tag 3 #1 2B}")
	if c.backup(2) != 1 || c.backup(0) != 1 {
		t.Fatalf("backups %d %d, want 1 1", c.backup(0), c.backup(2))
	}
	c.all()
	c.want("n1 delivers", c.take(1), `deliver c7 0#1 "m1"`)
	c.want("n3 delivers", c.take(3), `deliver c7 0#1 "m1"`)
	c.want("acks wait for the timer", c.pending())
	c.advance(2 * time.Millisecond)
	c.want("acks to the master", c.pending(), "n1→n0 ack{c7 0→1 ≤1}", "n3→n0 ack{c7 0→1 ≤1}")
	c.deliver(func(f flight) bool { return f.from == 1 })
	c.want("one ack is not enough", c.pending(), "n3→n0 ack{c7 0→1 ≤1}")
	c.all()
	if c.backup(2) != 0 || c.backup(0) != 0 {
		t.Fatalf("after the commit: backups %d %d, want 0 0", c.backup(0), c.backup(2))
	}
	if st := c.ls[0].Stats(); st.Commits != 1 || st.Sent != 2 {
		t.Fatalf("master stats %+v", st)
	}
}

// TestBehindSkipsCommitted: a non-master whose program is behind the
// master's learns of the commit first; when its program reaches the send
// it keeps nothing (the log of §4.2).
func TestBehindSkipsCommitted(t *testing.T) {
	c := newCluster(t, 2, 2, 1)
	c.send(0, 1, "a")
	c.send(0, 1, "b")
	c.all()
	c.send(2, 1, "a")
	c.send(2, 1, "b")
	if st := c.ls[2].Stats(); st.Skipped != 2 || st.Backup != 0 || st.Backed != 0 {
		t.Fatalf("non-master behind: %+v, want 2 skipped and nothing kept", st)
	}
	c.send(2, 1, "c")
	if c.backup(2) != 1 {
		t.Fatalf("a send beyond the commit is kept: backup %d", c.backup(2))
	}
}

// TestMasterCrashMidSend (§4.2, recovery): the master's send reaches one
// destination replica only, then the master dies; the new master resends
// its backup to both; the one that had it drops the duplicate, the other
// delivers it once; the new master then commits.
func TestMasterCrashMidSend(t *testing.T) {
	c := newCluster(t, 2, 2, 1)
	c.send(2, 1, "x")
	c.send(2, 1, "y")
	c.send(0, 1, "x")
	c.send(0, 1, "y")
	c.deliver(func(f flight) bool { return f.to == 1 && f.m.Kind() == KindData })
	c.want("n1 has both", c.take(1), `deliver c7 0#1 "x"`, `deliver c7 0#2 "y"`)
	c.crash(0)
	c.want("the crash is invisible to the others", c.take(1), "lost n0 of rank 0")
	if !c.ls[2].IsMaster() || c.ls[2].Stats().Resent != 4 {
		t.Fatalf("n2 master %v, stats %+v", c.ls[2].IsMaster(), c.ls[2].Stats())
	}
	c.all()
	c.want("n1: no duplicate", c.take(1))
	c.want("n3 delivers each once", c.take(3), "lost n0 of rank 0", `deliver c7 0#1 "x"`, `deliver c7 0#2 "y"`)
	if st := c.ls[1].Stats(); st.Duplicates != 2 {
		t.Fatalf("n1 stats %+v, want 2 duplicates", st)
	}
	c.advance(2 * time.Millisecond)
	c.all()
	if c.backup(2) != 0 {
		t.Fatalf("the new master committed nothing: backup %d", c.backup(2))
	}
}

// TestReceiverLostAndRankFailed: a destination replica that leaves is no
// longer waited for (the commit goes on without it), its death is only
// informational; when the last replica of a rank leaves, every process
// reports the rank failed.
func TestReceiverLostAndRankFailed(t *testing.T) {
	c := newCluster(t, 2, 2, 1)
	c.send(0, 1, "a")
	c.send(2, 1, "a")
	c.deliver(func(f flight) bool { return f.to == 1 })
	c.crash(3)
	c.want("n0 sees a replica lost", c.take(0), "lost n3 of rank 1")
	c.all()
	if c.backup(2) != 0 {
		t.Fatalf("commit without the lost receiver: n2 backup %d", c.backup(2))
	}
	c.crash(1)
	c.want("n0 sees rank 1 fail", c.take(0), "rank 1 failed")
	c.want("n2 sees rank 1 fail", c.take(2), "lost n3 of rank 1", "rank 1 failed")
	c.send(0, 1, "b")
	if st := c.ls[0].Stats(); st.ToFailed != 1 {
		t.Fatalf("send to a failed rank: %+v", st)
	}
}

// TestDecisionFollowed: the master's value wins; the master acts on it
// only after its fellow replica acknowledged it, and the fellow only once
// the master made it final.
func TestDecisionFollowed(t *testing.T) {
	c := newCluster(t, 1, 2, 1) // rank 0: n0 (master), n1
	c.decide(1, 1, "mine")
	c.decide(0, 1, "master's")
	c.want("the master waits for the ack", c.take(0))
	c.want("decision sent", c.pending(), `n0→n1 decision{b0 k1 "master's"}`)
	c.deliver(func(f flight) bool { return f.m.Kind() == KindDecision })
	c.want("the fellow waits for the commit", c.take(1))
	c.all()
	c.want("master decided", c.take(0), `decided 1 "master's"`)
	c.want("fellow follows", c.take(1), `decided 1 "master's"`)
	// A fellow that asks later gets the final value at once.
	c.decide(0, 2, "two")
	c.all()
	c.decide(1, 2, "other")
	c.want("late fellow", c.take(1), `decided 2 "two"`)
}

// TestDecisionMasterDiesUnacked: the master dies before every fellow
// acknowledged its decision; nobody acted on it, so the new master decides
// by itself, and a fellow that held the dead master's value takes the new
// one.
func TestDecisionMasterDiesUnacked(t *testing.T) {
	c := newCluster(t, 1, 3, 1) // rank 0: n0 (master), n1, n2
	c.decide(1, 1, "n1's")
	c.decide(2, 1, "n2's")
	c.decide(0, 1, "n0's")
	c.deliver(func(f flight) bool { return f.to == 2 && f.m.Kind() == KindDecision })
	c.crash(0) // n1 never got it
	c.want("nobody decided", append(c.take(1), c.take(2)...), "lost n0 of rank 0", "lost n0 of rank 0")
	c.all()
	c.want("new master decides its own", c.take(1), `decided 1 "n1's"`)
	c.want("fellow takes the new value", c.take(2), `decided 1 "n1's"`)
}

// TestDecisionFinalSurvives: a decision final at one fellow survives the
// master's death: the new master held the value (every live replica
// acknowledged it) and proposes it again.
func TestDecisionFinalSurvives(t *testing.T) {
	c := newCluster(t, 1, 3, 1)
	c.decide(1, 1, "n1's")
	c.decide(2, 1, "n2's")
	c.decide(0, 1, "n0's")
	c.deliver(func(f flight) bool { return f.m.Kind() != KindDecisionCommit })
	c.deliver(func(f flight) bool { return f.to == 2 })
	c.want("n2 acted", c.take(2), `decided 1 "n0's"`)
	c.crash(0) // n1 never got the commit
	c.all()
	c.want("n1 decides the same", c.take(1), "lost n0 of rank 0", `decided 1 "n0's"`)
}

// TestAckBound: acknowledgements leave after AckEvery deliveries or after
// AckDelay, whichever is first.
func TestAckBound(t *testing.T) {
	c := newCluster(t, 2, 1, 3)
	for i := range 4 {
		c.send(0, 1, fmt.Sprint(i))
	}
	c.deliver(func(f flight) bool { return f.m.Kind() == KindData })
	c.want("ack after 3", c.pending(), "n1→n0 ack{c7 0→1 ≤3}")
	c.all()
	c.advance(time.Millisecond)
	c.want("not yet", c.pending())
	c.advance(time.Millisecond)
	c.want("after AckDelay", c.pending(), "n1→n0 ack{c7 0→1 ≤4}")
}

// TestCommitLostWithMaster: the master's commit reached one fellow, not
// the other, when the master died; the new master held the commit and
// repeats it, so the other fellow does not keep the send for ever (found
// by the swarm, seed 1387, once a dead host's unsent messages were lost).
func TestCommitLostWithMaster(t *testing.T) {
	c := newCluster(t, 2, 3, 1) // rank 0: n0 (master), n2, n4
	for _, p := range []int{0, 2, 4} {
		c.send(p, 1, "a")
	}
	c.deliver(func(f flight) bool { return !(f.m.Kind() == KindCommit && f.to == 4) })
	if c.backup(2) != 0 || c.backup(4) != 1 {
		t.Fatalf("backups n2 %d n4 %d, want 0 1", c.backup(2), c.backup(4))
	}
	c.crash(0)
	c.all()
	if c.backup(4) != 0 {
		t.Fatalf("n4 still holds %d sends", c.backup(4))
	}
}

// TestFinish: a finished process answers Finished only once every other
// live process finished too (a Fin that comes before its own Finish
// counts), and a process that left the view counts as done.
func TestFinish(t *testing.T) {
	c := newCluster(t, 2, 2, 32)
	finish := func(p int) {
		c.ls[p].Handle(Finish{})
		c.collect()
	}
	finish(0)
	c.want("n0 tells the others", c.pending(), "n0→n1 fin", "n0→n2 fin", "n0→n3 fin")
	c.all()
	c.want("n0 waits", c.take(0))
	finish(1)
	finish(3)
	c.all()
	c.want("n0 still waits for n2", c.take(0))
	c.want("n1 waits for n2", c.take(1))
	c.crash(2)
	for _, p := range []int{0, 1, 3} {
		if got := c.take(p); !slices.Contains(got, "replica.Finished") {
			t.Fatalf("n%d after n2 left: %q, want Finished", p, got)
		}
	}
	finish(0)
	c.want("Finished only once", c.take(0))
}

// TestRetransmit: a data message dropped on its way to one destination
// replica (a full queue, a broken connection) is sent again by the master
// once that replica has acknowledged nothing new for Config.Retransmit;
// the replica delivers it once, and the master commits.
func TestRetransmit(t *testing.T) {
	c := newCluster(t, 2, 2, 32) // rank 0: n0 (master), n2; rank 1: n1, n3
	c.send(0, 1, "m1")
	c.send(2, 1, "m1")
	c.wire = slices.DeleteFunc(c.wire, func(f flight) bool { return f.to == 1 }) // lost to n1
	c.all()
	c.want("n3 delivers", c.take(3), `deliver c7 0#1 "m1"`)
	c.want("n1 has nothing", c.take(1))
	c.advance(2 * time.Millisecond)
	c.all()
	if c.backup(0) != 1 {
		t.Fatalf("the master committed without n1's acknowledgement")
	}
	c.advance(200 * time.Millisecond)
	c.want("sent again to n1 only", c.pending(), "n0→n1 data{c7 0→1 tag 3 #1 2B}")
	c.all()
	c.want("n1 delivers once", c.take(1), `deliver c7 0#1 "m1"`)
	c.advance(2 * time.Millisecond)
	c.all()
	if c.backup(0) != 0 || c.backup(2) != 0 || c.ls[0].Stats().Retransmits != 1 {
		t.Fatalf("backups %d %d, retransmits %d: want 0 0 1", c.backup(0), c.backup(2), c.ls[0].Stats().Retransmits)
	}
	c.advance(time.Second)
	c.want("nothing more once committed", c.pending())
}

// TestControlChannel: the sends of a control channel (Send.Control) go
// out as KindControlData, from the master, again by retransmission, and
// from a new master that resends its backup table; a receiver delivers
// them as any data, in sequence order, and acknowledges them.
func TestControlChannel(t *testing.T) {
	c := newCluster(t, 2, 2, 32) // rank 0: n0 (master), n2; rank 1: n1, n3
	send := func(p int, payload string) {
		c.ls[p].Handle(Send{Comm: 9, Dst: 1, Tag: 3, Payload: []byte(payload), Control: true})
		c.collect()
	}
	send(0, "r1")
	send(2, "r1")
	c.want("the master sends control data", c.pending(), "n0→n1 cdata{c9 0→1 tag 3 #1 2B}", "n0→n3 cdata{c9 0→1 tag 3 #1 2B}")
	c.wire = slices.DeleteFunc(c.wire, func(f flight) bool { return f.to == 1 }) // lost to n1
	c.all()
	c.want("n3 delivers", c.take(3), `deliver c9 0#1 "r1"`)
	c.advance(2 * time.Millisecond)
	c.all()
	c.advance(200 * time.Millisecond)
	c.want("sent again as control data", c.pending(), "n0→n1 cdata{c9 0→1 tag 3 #1 2B}")
	c.all()
	c.want("n1 delivers", c.take(1), `deliver c9 0#1 "r1"`)
	send(2, "r2")
	send(0, "r2")
	c.wire = nil // lost with the master
	c.crash(0)
	c.want("the new master resends control data", c.pending(),
		"n1→n2 ack{c9 0→1 ≤1}",
		"n2→n1 cdata{c9 0→1 tag 3 #1 2B}", "n2→n3 cdata{c9 0→1 tag 3 #1 2B}",
		"n2→n1 cdata{c9 0→1 tag 3 #2 2B}", "n2→n3 cdata{c9 0→1 tag 3 #2 2B}",
		"n3→n2 ack{c9 0→1 ≤1}")
	c.all()
	c.want("n1 delivers in order", c.take(1), "lost n0 of rank 0", `deliver c9 0#2 "r2"`)
}

// TestBackupBound: the backup table says it is full once it holds
// MaxBackup sends or MaxBackupBytes bytes, at the master and at a fellow
// alike (BackupFull, once), and has room again once the commit frees it
// (BackupRoom); the application holds its sends back in between (comm's
// replicated path), so the table never holds more than the bound.
func TestBackupBound(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(*Config)
		payload   string
		fullAfter int
	}{
		{"sends", func(c *Config) { c.MaxBackup = 3 }, "m", 3},
		{"bytes", func(c *Config) { c.MaxBackupBytes = 10 }, "four", 3}, // 12 bytes ≥ 10
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClusterWith(t, 2, 2, tc.edit) // rank 0: n0 (master), n2; rank 1: n1, n3
			for _, p := range []int{0, 2} {
				for i := range tc.fullAfter {
					if c.ls[p].BackupFull() {
						t.Fatalf("n%d: full after %d sends, want %d", p, i, tc.fullAfter)
					}
					c.send(p, 1, tc.payload)
				}
				if !c.ls[p].BackupFull() {
					t.Fatalf("n%d: not full after %d sends", p, tc.fullAfter)
				}
				c.want(fmt.Sprintf("n%d fills", p), c.take(p), "replica.BackupFull")
			}
			c.all()
			c.advance(2 * time.Millisecond) // acknowledgements
			c.all()                         // and the commit
			for _, p := range []int{0, 2} {
				if c.ls[p].BackupFull() || c.backup(p) != 0 {
					t.Fatalf("n%d: full %v with %d sends after the commit", p, c.ls[p].BackupFull(), c.backup(p))
				}
				c.want(fmt.Sprintf("n%d has room", p), c.take(p), "replica.BackupRoom")
			}
		})
	}
}

// ReceiveBorrowed: a Data lent for the call only is delivered from the
// lender's buffer when it is next in sequence, and copied, message and
// payload, when it arrives early and must wait for its predecessor, so
// that the lender may reuse both at once (comm decodes in the transport's
// read buffer, into one Data for every message).
func TestReceiveBorrowedCopiesEarlyArrivals(t *testing.T) {
	l, err := New(DefaultConfig(Layout{Ranks: 2, Replicas: 1}))
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(1, 1)
	l.Start(env)
	buf := []byte("second")
	lent := &Data{Comm: 1, Src: 0, Dst: 1, Seq: 2, Payload: buf}
	l.ReceiveBorrowed(0, lent)
	copy(buf, "reused")
	*lent = Data{Comm: 1, Src: 0, Dst: 1, Seq: 9, Payload: []byte("garbage")}
	if got := env.TakeEmitted(); len(got) != 0 {
		t.Fatalf("an early arrival emitted %v, want nothing", got)
	}
	first := []byte("first")
	l.ReceiveBorrowed(0, &Data{Comm: 1, Src: 0, Dst: 1, Seq: 1, Payload: first})
	var got []string
	for _, e := range env.TakeEmitted() {
		if d, ok := e.(Delivered); ok {
			got = append(got, fmt.Sprintf("#%d %s", d.Seq, d.Payload))
			if d.Seq == 1 && &d.Payload[0] != &first[0] {
				t.Errorf("the message next in sequence was copied; want it delivered from the lent buffer")
			}
		}
	}
	if want := []string{"#1 first", "#2 second"}; !slices.Equal(got, want) {
		t.Fatalf("delivered %q, want %q", got, want)
	}
}

// Config.KeepReleased: a send committed to another rank, and one never
// kept (already committed when this replica's program reached it), are
// released for reuse; one to the process's own rank is not (its
// Delivered event may still wait for the caller).
func TestKeepReleased(t *testing.T) {
	cfg := DefaultConfig(Layout{Ranks: 2, Replicas: 2})
	cfg.KeepReleased = true
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(0, 1)
	l.Start(env)
	toOther, toSelf := []byte("to rank 1"), []byte("to rank 0")
	l.SendMsg(1, 1, 0, toOther)
	l.SendMsg(1, 0, 0, toSelf)
	if got := l.TakeReleased(nil); len(got) != 0 {
		t.Fatalf("released %q before any commit", got)
	}
	l.Receive(1, &Ack{Comm: 1, Src: 0, Dst: 1, Upto: 1})
	l.Receive(3, &Ack{Comm: 1, Src: 0, Dst: 1, Upto: 1})
	l.Receive(2, &Ack{Comm: 1, Src: 0, Dst: 0, Upto: 1})
	l.Fire(ackTick{}) // this process acknowledges its own delivery
	if s := l.Stats(); s.Backup != 0 {
		t.Fatalf("backup holds %d sends after the commits, want 0", s.Backup)
	}
	got := l.TakeReleased(nil)
	if len(got) != 1 || &got[0][0] != &toOther[0] {
		t.Fatalf("released %q, want only the send to rank 1", got)
	}
	// Process 2 (replica 1 of rank 0), whose program reaches a send its master
	// committed: not kept, released at once.
	fellow, _ := New(cfg)
	fellowEnv := coretest.NewEnv(2, 1)
	fellow.Start(fellowEnv)
	fellow.Receive(0, &Commit{Comm: 1, Src: 0, Dst: 1, Upto: 1})
	late := []byte("late")
	fellow.SendMsg(1, 1, 0, late)
	if got := fellow.TakeReleased(nil); len(got) != 1 || &got[0][0] != &late[0] {
		t.Fatalf("a send already committed: released %q, want it", got)
	}
	if got := fellow.TakeReleased(nil); len(got) != 0 {
		t.Fatalf("TakeReleased twice gave %q the second time, want nothing", got)
	}
}

// ReserveNext, CommitReserved and ReleaseReserved: a reader placing a
// message's payload itself holds back every other copy of it (a new
// master's resend on another connection) and the channel's later
// messages until it commits (the copy is dropped, the later ones follow)
// or releases (a copy held meanwhile is delivered the usual way).
func TestReservedPlacement(t *testing.T) {
	l, err := New(DefaultConfig(Layout{Ranks: 2, Replicas: 2}))
	if err != nil {
		t.Fatal(err)
	}
	env := coretest.NewEnv(1, 1) // rank 1; rank 0's replicas are n0 and n2
	l.Start(env)
	data := func(seq uint64, payload string) *Data {
		return &Data{Comm: 1, Src: 0, Dst: 1, Seq: seq, Payload: []byte(payload)}
	}
	delivered := func() []string {
		var got []string
		for _, e := range env.TakeEmitted() {
			if d, ok := e.(Delivered); ok {
				got = append(got, fmt.Sprintf("#%d %q placed=%v", d.Seq, d.Payload, d.Placed))
			}
		}
		return got
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
	}
	if l.ReserveNext(0, data(2, "")) {
		t.Fatal("reserved #2 before #1 was delivered")
	}
	if !l.ReserveNext(0, data(1, "")) {
		t.Fatal("could not reserve the next message, #1")
	}
	if l.ReserveNext(2, data(1, "")) {
		t.Fatal("reserved #1 twice")
	}
	l.Receive(2, data(1, "copy"))
	l.Receive(0, data(2, "b"))
	want("while #1 is placed", delivered())
	l.CommitReserved(data(1, ""))
	want("after the commit", delivered(), `#1 "" placed=true`, `#2 "b" placed=false`)

	if !l.ReserveNext(0, data(3, "")) {
		t.Fatal("could not reserve #3")
	}
	l.Receive(2, data(3, "c"))
	l.ReleaseReserved(data(3, ""))
	want("after the release", delivered(), `#3 "c" placed=false`)

	if !l.ReserveNext(0, data(4, "")) {
		t.Fatal("could not reserve #4")
	}
	l.ReleaseReserved(data(4, ""))
	want("a release with no copy held", delivered())
	if !l.ReserveNext(2, data(4, "")) {
		t.Fatal("could not reserve #4 again once released")
	}
	l.CommitReserved(data(4, "d"))
	want("placed by another reader", delivered(), `#4 "d" placed=true`)
	if st := l.Stats(); st.Delivered != 4 || st.Placed != 2 {
		t.Fatalf("stats: %d delivered, %d placed; want 4, 2", st.Delivered, st.Placed)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a commit without a reservation did not panic")
		}
	}()
	l.CommitReserved(data(5, ""))
}
