package resil_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cohort-mp/cohort/comm"
	"github.com/cohort-mp/cohort/resil"
)

// A job of 3 ranks and 1 spare, in one process: each rank sums the ranks
// 10 times, checkpointing its partial sum every 2 iterations. Had a
// rank's process died, the spare would have taken its rank and every
// rank would have gone back to the last checkpoint.
func ExampleJob_Run() {
	ctx := context.Background()
	ss, err := comm.LocalSpares(ctx, 3, 1) // under cohort run: comm.Init(ctx, comm.AllowSpares())
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Finalize(ctx)
			j, err := resil.New(s, resil.DefaultConfig())
			if err != nil {
				panic(err)
			}
			var total int64
			err = j.Run(ctx, func(ctx context.Context, c *comm.Comm, state []byte, epoch int) error {
				it, sum := 0, int64(0)
				if state != nil { // resumed from checkpoint epoch
					it, sum = int(binary.LittleEndian.Uint64(state)), int64(binary.LittleEndian.Uint64(state[8:]))
				}
				for ; it < 10; it++ {
					if it%2 == 0 {
						st := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(it)), uint64(sum))
						if err := j.Checkpoint(ctx, st); err != nil {
							return err
						}
					}
					x := []int64{int64(c.Rank())}
					if err := comm.Allreduce(ctx, c, x, x, comm.Sum[int64]()); err != nil {
						return err
					}
					sum += x[0]
				}
				total = sum
				return nil
			})
			if err != nil {
				panic(err)
			}
			if j.Rank() == 0 {
				fmt.Println("sum", total, "restarts", j.Stats().Restarts)
			}
		}()
	}
	wg.Wait()
	// Output: sum 30 restarts 0
}
