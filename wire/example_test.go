package wire_test

import (
	"bytes"
	"fmt"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/wire"
)

// Ping is a protocol message: its kind, and its fields' encoding.
type Ping struct {
	Seq     uint64
	Suspect []core.NodeID
}

var kindPing = core.MakeKind(core.ProtoTest, 1)

func (Ping) Kind() core.Kind { return kindPing }

func (p Ping) MarshalWire(e *wire.Encoder) {
	e.Uvarint(p.Seq)
	e.NodeIDs(p.Suspect)
}

func decodePing(d *wire.Decoder) (core.Msg, error) {
	p := Ping{Seq: d.Uvarint(), Suspect: d.NodeIDs()}
	return p, d.Err()
}

// A message goes out through a FrameWriter and comes back through a
// FrameReader and the Codec.
func Example() {
	codec := wire.NewCodec()
	if err := codec.Register(kindPing, "test.Ping", decodePing); err != nil {
		panic(err)
	}

	var conn bytes.Buffer // stands for a TCP connection
	w := wire.NewFrameWriter(&conn, 0)
	w.WriteMessage(wire.Frame{Src: 1, Dst: 2, Epoch: 5}, Ping{Seq: 300, Suspect: []core.NodeID{7}})
	w.Flush()
	fmt.Printf("% x\n", conn.Bytes())

	r := wire.NewFrameReader(&conn)
	f, err := r.ReadFrame()
	if err != nil {
		panic(err)
	}
	m, err := codec.Unmarshal(f.Kind, f.Payload)
	fmt.Println(f, codec.Name(f.Kind), m, err)
	// Output:
	// 00 00 00 0a 81 fe 03 01 02 05 ac 02 01 07
	// test/1 n1→n2 epoch 5, 4 bytes test.Ping {300 [n7]} <nil>
}

// Both ends of a connection prove knowledge of the job secret (see the
// package doc for the whole exchange).
func ExampleComputeProof() {
	secret := []byte("created at launch")
	a := wire.Hello{Version: wire.Version, JobID: "job-1", Node: 1, Nonce: [16]byte{1}}
	b := wire.Hello{Version: wire.Version, JobID: "job-1", Node: 2, Nonce: [16]byte{2}}
	fmt.Println(wire.CheckHello(a, b), wire.CheckHello(b, a))

	fromA := wire.ComputeProof(secret, a, b, true)  // a dialled b
	fromB := wire.ComputeProof(secret, b, a, false) // b accepted
	fmt.Println(wire.VerifyProof(secret, b, a, false, fromA), wire.VerifyProof(secret, a, b, true, fromB))
	fmt.Println(wire.VerifyProof([]byte("guess"), b, a, false, fromA))
	// Output:
	// <nil> <nil>
	// true true
	// false
}
