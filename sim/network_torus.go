package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cohort-mp/cohort/core"
)

// Torus is the distance model of Varma et al. §7.1 (the membership paper) for
// BlueGene/L: nodes sit in an X×Y×Z 3D torus, and every hop of a message
// costs the point-to-point latency, so
//
//	latency(a, b) = Base + PerHop · hops(a, b)
//	hops(a, b)    = Σ over x, y, z of min(|Δ|, D − |Δ|)   (wraparound)
//
// (|Δ| alone when Mesh is set: a partition smaller than a midplane is a mesh,
// paper §5). Node ids are mapped in order, x fastest: id i sits at
// x = i mod X, y = (i / X) mod Y, z = (i / (X·Y)) mod Z; ids beyond X·Y·Z wrap
// around, as several tasks per compute node would (coprocessor or virtual
// node mode). Latency between a pair is constant, so pairs stay FIFO. Build
// it with [NewTorus] or [BlueGeneL].
type Torus struct {
	X, Y, Z int
	// Base is added to every message (0 in the paper's model).
	Base time.Duration
	// PerHop is the cost of one hop (paper: L = 4.6 µs, MPI on BG/L).
	PerHop time.Duration
	// Mesh disables the wraparound links.
	Mesh bool
}

// NewTorus returns a torus network of the given dimensions and costs.
func NewTorus(x, y, z int, base, perHop time.Duration) (Torus, error) {
	t := Torus{X: x, Y: y, Z: z, Base: base, PerHop: perHop}
	return t, t.Validate()
}

// BlueGeneL returns the membership paper's BG/L midplane: an 8×8×8 torus,
// 4.6 µs per hop, no base cost.
func BlueGeneL() Torus {
	return Torus{X: 8, Y: 8, Z: 8, PerHop: 4600 * time.Nanosecond}
}

// Validate reports whether t is usable.
func (t Torus) Validate() error {
	if t.X < 1 || t.Y < 1 || t.Z < 1 {
		return fmt.Errorf("%w: torus dimensions %d×%d×%d must be positive", ErrBadNetwork, t.X, t.Y, t.Z)
	}
	if t.Base < 0 || t.PerHop < 0 {
		return fmt.Errorf("%w: negative torus latency (base %v, per hop %v)", ErrBadNetwork, t.Base, t.PerHop)
	}
	return nil
}

// Coord returns the torus coordinates of node id.
func (t Torus) Coord(id core.NodeID) (x, y, z int) {
	if t.X < 1 || t.Y < 1 || t.Z < 1 {
		panic(fmt.Sprintf("sim: torus %d×%d×%d used without Validate", t.X, t.Y, t.Z))
	}
	i := int(uint64(id) % uint64(t.X*t.Y*t.Z))
	return i % t.X, (i / t.X) % t.Y, i / (t.X * t.Y)
}

func (t Torus) dim(a, b, d int) int {
	delta := a - b
	if delta < 0 {
		delta = -delta
	}
	if !t.Mesh && d-delta < delta {
		return d - delta
	}
	return delta
}

// Hops is the number of links between a and b (the paper's "sum of
// differences between each pair of x, y and z coordinates").
func (t Torus) Hops(a, b core.NodeID) int {
	ax, ay, az := t.Coord(a)
	bx, by, bz := t.Coord(b)
	return t.dim(ax, bx, t.X) + t.dim(ay, by, t.Y) + t.dim(az, bz, t.Z)
}

// Transit implements Network.
func (t Torus) Transit(from, to core.NodeID, _ int, _ time.Duration, _ *rand.Rand) (time.Duration, bool) {
	return t.Base + t.PerHop*time.Duration(t.Hops(from, to)), true
}

func (Torus) inOrder() {}

func (t Torus) String() string {
	kind := "torus"
	if t.Mesh {
		kind = "mesh"
	}
	return fmt.Sprintf("%s(%d×%d×%d,base=%v,per-hop=%v)", kind, t.X, t.Y, t.Z, t.Base, t.PerHop)
}
