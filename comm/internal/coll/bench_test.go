package coll

import (
	"context"
	"fmt"
	"testing"

	"github.com/cohort-mp/cohort/comm/internal/coll/colltest"
)

// BenchmarkAllreduce: Allreduce of float64 sums on 4 ranks over the
// in-memory transport, 8 B … 4 MiB per rank, with the algorithm Allreduce
// picks and with each algorithm forced. ns/op is one Allreduce (all ranks);
// MB/s counts one rank's vector.
func BenchmarkAllreduce(b *testing.B) {
	const p = 4
	for _, size := range []int{8, 64, 512, 4 << 10, 32 << 10, 256 << 10, 1 << 20, 4 << 20} {
		for _, alg := range []struct {
			name string
			alg  allreduceAlg
		}{{"auto", -1}, {"doubling", allreduceDoubling}, {"rabenseifner", allreduceRabenseifner}, {"ring", allreduceRing}, {"flat", allreduceFlat}} {
			b.Run(fmt.Sprintf("bytes=%d/%s", size, alg.name), func(b *testing.B) {
				benchAllreduce(b, p, size/8, alg.alg)
			})
		}
	}
}

func benchAllreduce(b *testing.B, p, n int, alg allreduceAlg) {
	ctx := context.Background()
	net, err := colltest.New(p)
	if err != nil {
		b.Fatal(err)
	}
	bufs := make([][]float64, p)
	for r := range bufs {
		bufs[r] = make([]float64, n)
	}
	sum := Sum[float64]()
	b.SetBytes(int64(n * 8))
	b.ReportAllocs()
	b.ResetTimer()
	errs := net.Run(func(ep *colltest.Endpoint) error {
		buf := bufs[ep.Rank()]
		for i := 0; i < b.N; i++ {
			var err error
			if alg < 0 {
				err = Allreduce(ctx, ep, buf, buf, sum)
			} else {
				c := begin(ctx, ep, "allreduce")
				err = c.done(allreduce(c, buf, nil, sum, alg))
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
