package coll

import "context"

// Gather concatenates every rank's send, in rank order, into recv on root:
// every send has the same length k, and recv has Size·k elements on root
// (other ranks may pass nil).
func Gather[T Elem](ctx context.Context, t Transport, send, recv []T, root int) error {
	c := begin(ctx, t, "gather")
	if err := c.checkRoot(root); err != nil {
		return err
	}
	var bad error
	if c.rank == root && len(recv) != c.size*len(send) {
		// Take part with a scratch buffer so that the other ranks finish.
		bad = c.errorf(ErrCount, "len(recv) = %d on root, want %d ranks × %d", len(recv), c.size, len(send))
		recv = make([]T, c.size*len(send))
	}
	return firstErr(bad, c.done(binomialGather(c, AsBytes(send), AsBytes(recv), root)))
}

// binomialGather: the mirror of the binomial broadcast. The rank at distance v
// from root collects the blocks of distances [v, v + lowbit(v)) and sends them
// up in one message: ⌈log₂ p⌉ rounds, p − 1 messages (P2P-MPI's flat tree
// needs p − 1 rounds at root).
func binomialGather(c *call, send, recv []byte, root int) error {
	p, v, k := c.size, c.relOf(root), len(send)
	var tmp []byte
	if c.rank == root && root == 0 {
		tmp = recv
	} else {
		sub := p
		if v != 0 {
			sub = min(lowbit(v), p-v)
		}
		tmp = make([]byte, sub*k)
	}
	copy(tmp, send)
	for mask := 1; mask < p; mask <<= 1 {
		if v&mask != 0 {
			if err := c.send(c.realFromRel(v-mask, root), phaseMain, tmp[:min(mask, p-v)*k]); err != nil {
				return err
			}
			break
		}
		if src := v | mask; src < p {
			cnt := min(mask, p-src)
			if err := c.recvInto(c.realFromRel(src, root), phaseMain, tmp[mask*k:(mask+cnt)*k]); err != nil {
				return err
			}
		}
	}
	if c.rank == root && root != 0 {
		copy(recv[root*k:], tmp[:(p-root)*k])
		copy(recv[:root*k], tmp[(p-root)*k:])
	}
	return nil
}

// Gatherv gathers counts[i] elements from rank i (len(send) = counts[Rank])
// into recv on root, packed in rank order (len(recv) = sum of counts). counts
// is read on root only; other ranks may pass nil.
func Gatherv[T Elem](ctx context.Context, t Transport, send, recv []T, counts []int, root int) error {
	c := begin(ctx, t, "gatherv")
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if c.rank != root {
		return c.done(c.send(root, phaseMain, AsBytes(send)))
	}
	displs, err := c.checkCounts("counts", counts)
	if err == nil && (len(send) != counts[root] || len(recv) != displs[c.size]) {
		err = c.errorf(ErrCount, "len(send) = %d, len(recv) = %d on root, want counts[%d] = %d and %d",
			len(send), len(recv), root, counts[root], displs[c.size])
	}
	if err != nil {
		// Take the other ranks' messages so that they finish.
		for r := 0; r < c.size; r++ {
			if r != root {
				if _, rerr := c.recv(r, phaseMain); rerr != nil {
					return firstErr(err, rerr)
				}
			}
		}
		return err
	}
	// Linear: the root posts one receive per rank (p − 1 messages, one round
	// of the root's link); with varying counts a tree would have to forward
	// every block, and most of the time goes into the root's link anyway.
	copy(recv[displs[root]:], send)
	for r := 0; r < c.size; r++ {
		if r != root {
			if err := c.recvInto(r, phaseMain, AsBytes(recv[displs[r]:displs[r+1]])); err != nil {
				return err
			}
		}
	}
	return c.done(nil)
}

// Scatter sends block i of root's send (Size blocks of len(recv) elements)
// to rank i's recv. send is read on root only (other ranks may pass nil);
// every rank's recv has the same length.
func Scatter[T Elem](ctx context.Context, t Transport, send, recv []T, root int) error {
	c := begin(ctx, t, "scatter")
	if err := c.checkRoot(root); err != nil {
		return err
	}
	var bad error
	if c.rank == root && len(send) != c.size*len(recv) {
		// Take part with a zero buffer so that the other ranks finish.
		bad = c.errorf(ErrCount, "len(send) = %d on root, want %d ranks × %d", len(send), c.size, len(recv))
		send = make([]T, c.size*len(recv))
	}
	return firstErr(bad, c.done(binomialScatter(c, AsBytes(send), AsBytes(recv), root)))
}

// binomialScatter: the mirror of binomialGather: ⌈log₂ p⌉ rounds.
func binomialScatter(c *call, send, recv []byte, root int) error {
	p, v, k := c.size, c.relOf(root), len(recv)
	var tmp []byte
	mask := pof2Ceil(p)
	switch {
	case v != 0:
		mask = lowbit(v)
		tmp = make([]byte, min(mask, p-v)*k)
		if err := c.recvInto(c.realFromRel(v-mask, root), phaseMain, tmp); err != nil {
			return err
		}
	case root == 0:
		tmp = send
	default:
		tmp = make([]byte, p*k)
		copy(tmp, send[root*k:])
		copy(tmp[(p-root)*k:], send[:root*k])
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < p {
			cnt := min(mask, p-v-mask)
			if err := c.send(c.realFromRel(v+mask, root), phaseMain, tmp[mask*k:(mask+cnt)*k]); err != nil {
				return err
			}
		}
	}
	copy(recv, tmp[:k])
	return nil
}

// Scatterv sends counts[i] elements of root's send, packed in rank order
// (len(send) = sum of counts), to rank i's recv (len(recv) = counts[i]).
// send and counts are read on root only; other ranks may pass nil.
func Scatterv[T Elem](ctx context.Context, t Transport, send []T, counts []int, recv []T, root int) error {
	c := begin(ctx, t, "scatterv")
	if err := c.checkRoot(root); err != nil {
		return err
	}
	if c.rank != root {
		return c.done(c.recvInto(root, phaseMain, AsBytes(recv)))
	}
	displs, err := c.checkCounts("counts", counts)
	if err == nil && (len(send) != displs[c.size] || len(recv) != counts[root]) {
		err = c.errorf(ErrCount, "len(send) = %d, len(recv) = %d on root, want %d and counts[%d] = %d",
			len(send), len(recv), displs[c.size], root, counts[root])
	}
	if err != nil {
		// Send every rank an empty message so that none waits forever (a
		// rank expecting elements reports ErrCount).
		for r := 0; r < c.size; r++ {
			if r != root {
				if serr := c.send(r, phaseMain, nil); serr != nil {
					return firstErr(err, serr)
				}
			}
		}
		return err
	}
	// Linear, for the reason given in Gatherv.
	for r := 0; r < c.size; r++ {
		if r != root {
			if err := c.send(r, phaseMain, AsBytes(send[displs[r]:displs[r+1]])); err != nil {
				return err
			}
		}
	}
	copy(recv, send[displs[root]:displs[root+1]])
	return nil
}
