package comm

import (
	"context"
	"slices"

	"github.com/cohort-mp/cohort/core"
)

// # Fault-tolerant agreement (Agree, Shrink)
//
// Agree is a consensus among the members of a communicator that tolerates
// any number of failures, including the coordinator's, built on what the
// membership service guarantees: views are consistent (every process that
// installs epoch E installs the same members) and, without partitions, form
// one chain in which a failed rank, once excluded, stays excluded. A
// process's set F of failed ranks is therefore always a prefix of the same
// growing sequence, and a process outside F is alive or not yet noticed.
//
// It is Paxos in which the ballot is the coordinator's rank and a quorum is
// "every member not in the proposer's F" instead of a majority:
//
//   - Each participant p considers the coordinator to be the lowest rank not
//     in F_p, and sends it CONTRIB(flag, accepted ballot and value) when it
//     calls Agree and again whenever F_p grows and the coordinator changes.
//     Sending CONTRIB to c is p's promise to accept nothing from a ballot
//     below c.
//   - A coordinator c waits for CONTRIB from every rank not in F_c (F_c may
//     grow meanwhile: it then waits for fewer). If some contribution carries
//     an accepted value, it proposes the one with the highest ballot;
//     otherwise it proposes a fresh value: the AND of the flags of the ranks
//     not in F_c, and F_c itself. It sends ACCEPT(c, v) to every rank not in
//     F_c.
//   - A participant accepts ACCEPT(b, v) unless it promised a ballot above b,
//     records (b, v) and answers ACCEPTED(b).
//   - When c holds ACCEPTED from every rank not in F_c, v is decided: c
//     sends DECIDED(v) to every live member and returns v. A process that
//     receives DECIDED(v) forwards it to every live member (so the decision
//     reaches everyone even if c dies while sending it) and returns v. A
//     process that has decided answers every later step of that agreement
//     with DECIDED, so a new coordinator that waits for it learns the
//     decision.
//
// Why it is correct. Agreement: suppose v is decided at ballot c, so every
// rank outside F_c accepted (c, v). Take any later proposal at ballot c' > c
// with quorum Q' = ranks outside F_{c'}. Because the F sets are prefixes of
// one chain, one of F_c, F_{c'} contains the other, and Q' ∩ (ranks outside
// F_c) contains c' itself or c (neither is in its own F, and the smaller F
// excludes neither), so some member of Q' accepted (c, v); it accepted it
// before promising c' (after the promise it would have refused), so its
// contribution carries a ballot ≥ c, and by induction over the ballots
// between c and c' every such accepted value is v: c' proposes v. Hence
// every decision, whoever makes it, is v, and forwarding only spreads v.
// When the coordinator dies before anyone decided, its successor finds
// either no accepted value (then nothing can have been decided: a decision
// needs every live rank's acceptance) or the highest accepted one, which it
// completes. Termination: a coordinator waits only for ranks outside its F,
// each of which is alive (it answers) or will fail (the detector then puts
// it in F and the wait shrinks); the coordinator itself is either alive or
// replaced. Messages from ranks in F are ignored, so a falsely excluded
// process cannot disturb the survivors (it is evicted and its operations
// fail with ErrEvicted). The agreement is uniform: a process that decided
// and then crashed decided the same value as the survivors (a decision
// needs every live rank's acceptance, which the next coordinator finds).
// agree_test.go checks all this on thousands of random schedules with
// coordinators crashing in every phase; it fails if the coordinator
// proposes a fresh value when an accepted one exists.
//
// Validity: the result is the AND of the flags of exactly the ranks outside
// the agreed failed set, every one of which called Agree. Shrink is an
// agreement whose decided failed set defines the new communicator, so every
// survivor builds the same one even if more ranks fail during the call (a
// rank that fails after the decision is a failed member of the new
// communicator, reported as usual).

// agreeInst is one agreement of a communicator at this process. Guarded by
// the session's mu.
type agreeInst struct {
	started   bool
	flag      int64
	promised  int // highest ballot promised; -1: none
	accB      int // ballot of the accepted value; -1: none
	accV      agreeValue
	lastCoord int // the coordinator our contribution went to; -1: none

	// Coordinator state.
	contribs  map[int]contrib
	accepting bool
	prop      agreeValue
	acks      map[int]bool

	decided bool
	dec     agreeValue
	done    chan struct{} // closed when decided or failed
	err     error
}

type contrib struct {
	flag int64
	accB int
	accV agreeValue
}

// agreeNote is an agreement step for a communicator not created here yet.
type agreeNote struct {
	from core.NodeID
	m    agreeMsg
}

func (c *commState) instLocked(n uint64) *agreeInst {
	in := c.agree[n]
	if in == nil {
		in = &agreeInst{promised: -1, accB: -1, lastCoord: -1, contribs: map[int]contrib{}, acks: map[int]bool{}, done: make(chan struct{})}
		c.agree[n] = in
	}
	return in
}

func (in *agreeInst) decide(v agreeValue) {
	if in.decided || in.err != nil {
		return
	}
	in.decided, in.dec = true, v
	in.contribs, in.acks = nil, nil
	close(in.done)
}

func (in *agreeInst) fail(err error) {
	if in.decided || in.err != nil {
		return
	}
	in.err = err
	close(in.done)
}

// Agree returns the bitwise AND of flag over the live members of the
// communicator (MPI_Comm_agree): every member must call it (in the same
// order as its other Agree and Shrink calls), and every one that returns
// returns the same value, even if members — the coordinator included — fail
// during the call. Ranks that failed before contributing are left out of
// the AND; the agreed set of failed ranks is acknowledged at every caller
// (as by AckFailed), so after Agree all survivors have acknowledged the same
// failures. Agree works on a revoked communicator. When ctx ends first it
// returns ctx's error; this process still takes part in that agreement in
// the background, so the others are not held up. Members that left the
// job (finalized) before contributing are left out of the AND as failed
// ones are, but Agree still needed them: it returns the agreed value with
// a [*ProcLeftError] naming them, at every caller alike.
func (c *Comm) Agree(ctx context.Context, flag int) (int, error) {
	v, err := c.agree(ctx, int64(flag))
	if err == nil && len(v.Left) > 0 {
		err = &ProcLeftError{Ranks: v.Left}
	}
	return int(v.Flag), err
}

// Shrink returns a new communicator of the members not known to have failed
// (MPI_Comm_shrink), ranks renumbered in the order of their old ranks. Every
// live member must call it; they agree on the failed set (see Agree), so all
// survivors build the same communicator even if more ranks fail during the
// call. It works on a revoked communicator (that is what it is for). The
// members that left the job by finalizing are left out too, without an
// error: they are done.
func (c *Comm) Shrink(ctx context.Context) (*Comm, error) {
	v, err := c.agree(ctx, -1)
	if err != nil {
		return nil, err
	}
	members := make([]core.NodeID, 0, len(c.st.members)-len(v.Failed))
	for r, n := range c.st.members {
		if !slices.Contains(v.Failed, r) {
			members = append(members, n)
		}
	}
	return c.s.newComm(childID(c.st.id, c.st.created.Add(1)), members), nil
}

// startAgree joins the communicator's next agreement with flag.
func (c *Comm) startAgree(flag int64) (*agreeInst, error) {
	s := c.s
	s.mu.Lock()
	if s.state != nil {
		s.mu.Unlock()
		return nil, s.state
	}
	c.st.agreeCalls++
	in := c.st.instLocked(c.st.agreeCalls)
	in.started, in.flag = true, flag
	sends := s.agreeProgressLocked(c.st, c.st.agreeCalls, in)
	s.mu.Unlock()
	s.sendAll(sends)
	return in, nil
}

func (c *Comm) agree(ctx context.Context, flag int64) (agreeValue, error) {
	s := c.s
	in, err := c.startAgree(flag)
	if err != nil {
		return agreeValue{}, err
	}
	select {
	case <-in.done:
	case <-ctx.Done():
		return agreeValue{}, ctx.Err()
	}
	if in.err != nil {
		return agreeValue{}, in.err
	}
	s.mu.Lock()
	for _, r := range in.dec.Failed {
		if r >= 0 && r < len(c.st.acked) {
			c.st.acked[r] = true
		}
	}
	s.mu.Unlock()
	return in.dec, nil
}

// coordLocked is the lowest rank of c not known failed.
func coordLocked(c *commState) int {
	for r, f := range c.failed {
		if !f {
			return r
		}
	}
	return -1
}

func (s *Session) agreeMsgTo(c *commState, r int, m agreeMsg) outgoing {
	m.Comm = c.id
	return outgoing{to: int(c.members[r]), kind: kindAgree, payload: m.marshal()}
}

// toLive addresses m to every rank of c not known failed, but this one and
// except.
func (s *Session) toLive(c *commState, except int, m agreeMsg) []outgoing {
	var out []outgoing
	for r := range c.members {
		if r != c.self && r != except && !c.failed[r] {
			out = append(out, s.agreeMsgTo(c, r, m))
		}
	}
	return out
}

// agreeProgressLocked moves agreement n of c forward after a local change
// (the call, a failure, a step received) and returns the steps to send.
func (s *Session) agreeProgressLocked(c *commState, n uint64, in *agreeInst) []outgoing {
	if in.decided || in.err != nil || !in.started {
		return nil
	}
	var out []outgoing
	coord := coordLocked(c)
	if coord != in.lastCoord && coord >= in.promised {
		in.lastCoord, in.promised = coord, coord
		if coord == c.self {
			in.contribs[c.self] = contrib{flag: in.flag, accB: in.accB, accV: in.accV}
		} else {
			out = append(out, s.agreeMsgTo(c, coord, agreeMsg{Instance: n, Type: agreeContrib, Ballot: coord, Flag: in.flag, AccB: in.accB, Value: in.accV}))
		}
	}
	if coord != c.self || in.promised > c.self {
		return out
	}
	if !in.accepting {
		for r, f := range c.failed {
			if _, ok := in.contribs[r]; !f && !ok {
				return out
			}
		}
		best := -1
		var v agreeValue
		for _, ct := range in.contribs {
			if ct.accB > best {
				best, v = ct.accB, ct.accV
			}
		}
		if best < 0 {
			v = agreeValue{Flag: -1, Failed: c.goneRanks(), Left: c.leftRanks()}
			for r, f := range c.failed {
				if !f {
					v.Flag &= in.contribs[r].flag
				}
			}
		}
		in.accepting, in.prop = true, v
		in.accB, in.accV = c.self, v
		in.acks[c.self] = true
		out = append(out, s.toLive(c, -1, agreeMsg{Instance: n, Type: agreeAccept, Ballot: c.self, Value: v})...)
	}
	for r, f := range c.failed {
		if !f && !in.acks[r] {
			return out
		}
	}
	v := in.prop
	in.decide(v)
	return append(out, s.toLive(c, -1, agreeMsg{Instance: n, Type: agreeDecided, Value: v})...)
}

// agreeStepLocked handles one agreement step from world node from.
func (s *Session) agreeStepLocked(c *commState, from core.NodeID, m agreeMsg) []outgoing {
	fr, ok := c.rankOf(from)
	if !ok || c.failed[fr] || m.Instance == 0 {
		return nil
	}
	if m.Ballot < -1 || m.Ballot >= len(c.members) {
		return nil
	}
	in := c.instLocked(m.Instance)
	if in.err != nil {
		return nil
	}
	if in.decided {
		if m.Type == agreeDecided {
			return nil
		}
		return []outgoing{s.agreeMsgTo(c, fr, agreeMsg{Instance: m.Instance, Type: agreeDecided, Value: in.dec})}
	}
	switch m.Type {
	case agreeContrib:
		if m.Ballot == c.self && !in.accepting {
			in.contribs[fr] = contrib{flag: m.Flag, accB: m.AccB, accV: m.Value}
		}
	case agreeAccept:
		if fr != m.Ballot || m.Ballot < in.promised {
			return nil
		}
		in.promised, in.accB, in.accV = m.Ballot, m.Ballot, m.Value
		out := []outgoing{s.agreeMsgTo(c, fr, agreeMsg{Instance: m.Instance, Type: agreeAccepted, Ballot: m.Ballot})}
		return append(out, s.agreeProgressLocked(c, m.Instance, in)...)
	case agreeAccepted:
		if in.accepting && m.Ballot == c.self {
			in.acks[fr] = true
		}
	case agreeDecided:
		in.decide(m.Value)
		return s.toLive(c, fr, agreeMsg{Instance: m.Instance, Type: agreeDecided, Value: m.Value})
	}
	return s.agreeProgressLocked(c, m.Instance, in)
}

// agreeOnFailureLocked moves every open agreement of c forward after a
// failure.
func (s *Session) agreeOnFailureLocked(c *commState) []outgoing {
	var out []outgoing
	for n, in := range c.agree {
		out = append(out, s.agreeProgressLocked(c, n, in)...)
	}
	return out
}

// onAgree handles an agreement step from world rank src.
func (s *Session) onAgree(src int, m agreeMsg) {
	if m.Comm&subMask != 0 {
		s.stats.malformed.Add(1)
		return
	}
	s.mu.Lock()
	if s.state != nil || s.failed[src] {
		s.mu.Unlock()
		return
	}
	c := s.comms[m.Comm]
	if c == nil {
		if !s.expectedCommLocked(m.Comm) {
			s.mu.Unlock()
			s.cutOff(src, &ContextError{Rank: src, Context: m.Comm})
			return
		}
		if len(s.agreeBuf[m.Comm]) < maxBufferedSteps {
			s.agreeBuf[m.Comm] = append(s.agreeBuf[m.Comm], agreeNote{from: core.NodeID(src), m: m})
		}
		s.mu.Unlock()
		return
	}
	out := s.agreeStepLocked(c, core.NodeID(src), m)
	s.mu.Unlock()
	s.sendAll(out)
}

// maxBufferedSteps bounds the agreement steps kept for a communicator that
// does not exist here yet (a member that runs ahead sends at most a few per
// agreement).
const maxBufferedSteps = 1 << 12
