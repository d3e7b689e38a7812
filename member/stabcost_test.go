package member_test

import (
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/core/coretest"
	"github.com/cohort-mp/cohort/member"
	"github.com/cohort-mp/cohort/wire"
)

// frame is a message in flight, encoded.
type frame struct {
	from, to core.NodeID
	kind     core.Kind
	b        []byte
}

// copyEnv is a coretest.Env that encodes what is sent, as a host does
// (core.SendCopies), and takes back the messages handed back.
type copyEnv struct {
	*coretest.Env
	codec  *wire.Codec
	out    *[]frame
	spares map[core.Kind][]core.Msg
	enc    wire.Encoder
}

func (e *copyEnv) SendCopies() bool { return true }
func (e *copyEnv) Send(to core.NodeID, m core.Msg) {
	e.enc.B = e.enc.B[:0]
	if err := e.codec.Encode(&e.enc, m); err != nil {
		panic(err)
	}
	*e.out = append(*e.out, frame{e.ID, to, m.Kind(), append([]byte(nil), e.enc.B...)})
}
func (e *copyEnv) Recycle(m core.Msg) {
	if e.codec.Reusable(m.Kind()) {
		e.spares[m.Kind()] = append(e.spares[m.Kind()], m)
	}
}

// BenchmarkStabilization measures what one view change costs the members
// themselves, in processor time and allocations: 64 members (fan-out 4)
// handle three failures, then the fourth is measured, from its report to
// the root's Stabilized (T_s), every message encoded and decoded as a host
// does (copyEnv), in one goroutine. The first three leave the members as
// a running job's are (pools filled, timers pending), and the time and
// allocations per op are one stabilization's over 60 members.
func BenchmarkStabilization(b *testing.B) {
	const n = 64
	cfg := member.DefaultConfig()
	cfg.Fanout = 4
	ids := make([]core.NodeID, n)
	for i := range ids {
		ids[i] = core.NodeID(i)
	}
	codec := wire.NewCodec()
	if err := member.RegisterCodecs(codec); err != nil {
		b.Fatal(err)
	}
	var d wire.Decoder
	b.ReportAllocs()
	for range b.N {
		b.StopTimer()
		g, err := member.NewGroup(cfg, ids)
		if err != nil {
			b.Fatal(err)
		}
		var q []frame
		ms := make([]*member.Member, n)
		es := make([]*copyEnv, n)
		for i := range ms {
			ms[i] = g.New()
			es[i] = &copyEnv{Env: coretest.NewEnv(core.NodeID(i), 1), codec: codec, out: &q, spares: map[core.Kind][]core.Msg{}}
			ms[i].Start(es[i])
		}
		q = q[:0]
		dead := map[core.NodeID]bool{}
		for k := 0; k < 4; k++ {
			victim, parent := core.NodeID(n-1-k), core.NodeID((n-2-k)/4)
			dead[victim] = true
			es[0].Emitted = nil
			if k == 3 {
				b.StartTimer()
			}
			ms[parent].Handle(core.Failed{Node: victim})
			done := false
			for len(q) > 0 && (!done || k < 3) {
				f := q[0]
				q = q[1:]
				if dead[f.to] {
					continue
				}
				e := es[f.to]
				var old core.Msg
				if s := e.spares[f.kind]; len(s) > 0 {
					old = s[len(s)-1]
					e.spares[f.kind] = s[:len(s)-1]
				}
				m, err := codec.Decode(&d, f.kind, f.b, old)
				if err != nil {
					b.Fatal(err)
				}
				ms[f.to].Receive(f.from, m)
				for _, ev := range es[0].Emitted {
					if _, ok := ev.(member.Stabilized); ok {
						done = true
					}
				}
			}
			if !done {
				b.Fatal("no stabilization")
			}
		}
	}
}
