package coll

import "context"

// Thresholds of the algorithm choices, in bytes of one rank's buffer unless
// said otherwise. They follow MPICH's defaults (Thakur, Rabenseifner and
// Gropp, "Optimization of Collective Communication Operations in MPICH",
// 2005); see the package doc.
const (
	// BcastShortBytes: below it (or with fewer than BcastMinRanks ranks)
	// Bcast uses a binomial tree.
	BcastShortBytes = 12 << 10
	// BcastLongBytes: at or above it Bcast's allgather phase is a ring;
	// below it, with a power-of-two size, recursive doubling.
	BcastLongBytes = 512 << 10
	// BcastMinRanks: with fewer ranks Bcast always uses the binomial tree.
	BcastMinRanks = 8
)

type bcastAlg int

const (
	bcastBinomial bcastAlg = iota
	bcastScatterDoubling
	bcastScatterRing
)

func pickBcast(bytes, p int) bcastAlg {
	switch {
	case bytes < BcastShortBytes || p < BcastMinRanks:
		return bcastBinomial
	case bytes < BcastLongBytes && p&(p-1) == 0:
		return bcastScatterDoubling
	default:
		return bcastScatterRing
	}
}

// Bcast copies root's buf into buf on every rank. Every rank passes a buf of
// the same length.
func Bcast[T Elem](ctx context.Context, t Transport, buf []T, root int) error {
	c := begin(ctx, t, "bcast")
	if err := c.checkRoot(root); err != nil {
		return err
	}
	b := AsBytes(buf)
	return c.done(bcastBytes(c, b, root, pickBcast(len(b), c.size)))
}

func bcastBytes(c *call, buf []byte, root int, alg bcastAlg) error {
	if c.size == 1 {
		return nil
	}
	switch alg {
	case bcastBinomial:
		return binomialBcast(c, buf, root, phaseMain)
	default:
		return scatterAllgatherBcast(c, buf, root, alg)
	}
}

// binomialBcast: the rank at distance v from root receives from v − lowbit(v)
// and sends to v + 2^k for every 2^k < lowbit(v): ⌈log₂ p⌉ rounds, p − 1
// messages of the whole buffer.
func binomialBcast(c *call, buf []byte, root, phase int) error {
	p, v := c.size, c.relOf(root)
	mask := pof2Ceil(p)
	if v != 0 {
		mask = lowbit(v)
		if err := c.recvInto(c.realFromRel(v-mask, root), phase, buf); err != nil {
			return err
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < p {
			if err := c.send(c.realFromRel(v+mask, root), phase, buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// scatterAllgatherBcast is van de Geijn's broadcast: the buffer is cut into p
// chunks of ⌈n/p⌉ bytes, scattered along a binomial tree (⌈log₂ p⌉ rounds,
// n·(p−1)/p bytes out of root) and then allgathered by recursive doubling
// (log₂ p rounds) or a ring (p − 1 rounds); every rank sends about 2n bytes
// whatever p, instead of the root sending n·⌈log₂ p⌉.
func scatterAllgatherBcast(c *call, buf []byte, root int, alg bcastAlg) error {
	p, v, n := c.size, c.relOf(root), len(buf)
	cs := (n + p - 1) / p
	displs := make([]int, p+1)
	for i := range displs {
		displs[i] = min(i*cs, n)
	}
	span := func(a, b int) []byte { return buf[displs[min(a, p)]:displs[min(b, p)]] }
	mask := pof2Ceil(p)
	if v != 0 {
		mask = lowbit(v)
		if err := c.recvInto(c.realFromRel(v-mask, root), phaseScatter, span(v, v+mask)); err != nil {
			return err
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < p {
			if err := c.send(c.realFromRel(v+mask, root), phaseScatter, span(v+mask, v+2*mask)); err != nil {
				return err
			}
		}
	}
	rankOf := func(i int) int { return c.realFromRel(i, root) }
	if alg == bcastScatterDoubling && p&(p-1) == 0 {
		return doublingAllgather(c, buf, displs, v, rankOf, phaseAllgather)
	}
	return ringAllgather(c, buf, displs, v, rankOf, phaseAllgather)
}
