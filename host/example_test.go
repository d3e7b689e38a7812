package host_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/host"
	"github.com/cohort-mp/cohort/transport/mem"
	"github.com/cohort-mp/cohort/wire"
)

// Example runs two hosts over an in-memory hub: node 1 pings node 2 every
// 10 ms, node 2 answers, and node 1 emits PongReceived, which the example
// waits for through OnEvent. With transport/tcp instead of mem the code is
// the same apart from building the transports.
func Example() {
	codec := wire.NewCodec()
	codec.Register(kindPing, "test.Ping", func(d *wire.Decoder) (core.Msg, error) { return Ping{d.Uvarint()}, d.Err() })
	codec.Register(kindPong, "test.Pong", func(d *wire.Decoder) (core.Msg, error) { return Pong{d.Uvarint()}, d.Err() })

	hub, _ := mem.NewHub(mem.Config{})
	t1, _ := hub.Join(1)
	t2, _ := hub.Join(2)
	t1.SetPeer(2, t2.Addr())
	defer t1.Close()
	defer t2.Close()

	pong := make(chan PongReceived, 1)
	h1, _ := host.New(&pinger{peers: []core.NodeID{2}, interval: 10 * time.Millisecond}, host.Config{
		Transport: t1, Codec: codec, Seed: 1,
		OnEvent: func(_ time.Duration, e core.Event) {
			if p, ok := e.(PongReceived); ok {
				select {
				case pong <- p:
				default:
				}
			}
		},
	})
	h2, _ := host.New(&pinger{}, host.Config{Transport: t2, Codec: codec, Seed: 2})

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, h := range []*host.Host{h1, h2} {
		wg.Add(1)
		go func() { defer wg.Done(); h.Run(ctx) }()
	}
	p := <-pong
	fmt.Printf("node 1 got pong %d from %v\n", p.Seq, p.From)
	cancel()
	wg.Wait()
	// Output: node 1 got pong 1 from n2
}
