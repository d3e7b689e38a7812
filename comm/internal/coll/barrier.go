package coll

import "context"

// Barrier returns once every rank has called it (or with an error).
//
// Dissemination barrier: in round k every rank sends an empty message to
// rank + 2^k and waits for one from rank − 2^k: ⌈log₂ p⌉ rounds for any p
// (P2P-MPI uses a 4-ary tree: 2·⌈log₄ p⌉ rounds).
func Barrier(ctx context.Context, t Transport) error {
	c := begin(ctx, t, "barrier")
	p, r := c.size, c.rank
	for d := 1; d < p; d <<= 1 {
		if err := c.sendrecvInto((r+d)%p, nil, (r-d+p)%p, phaseMain, nil); err != nil {
			return err
		}
	}
	return c.done(nil)
}
