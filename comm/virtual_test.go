package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

func vrange(lo, hi VNode) []VNode {
	var vs []VNode
	for v := lo; v < hi; v++ {
		vs = append(vs, v)
	}
	return vs
}

// Phoenix §2, Figure 1: [0, 64) over 4 processes in blocks of 16; a message
// to virtual node 36 goes to the process holding it. A message to a virtual
// node that no process holds is kept by the sender and delivered once the
// node is mapped (here by another process's Remap, learnt by flooding).
func TestVirtualHeldUntilMapped(t *testing.T) {
	ss := job(t, 4)
	each(t, ss, func(ctx context.Context, c *Comm) error {
		v, err := c.Virtual(64)
		if err != nil {
			return err
		}
		if r, ok := v.Owner(36); !ok || r != 2 {
			return fmt.Errorf("Owner(36) = %d %v, want 2 (Figure 1's blocks)", r, ok)
		}
		// Every rank has checked the initial map before rank 1 changes it.
		if err := Barrier(ctx, c); err != nil {
			return err
		}
		buf := make([]byte, 16)
		switch c.Rank() {
		case 1:
			if err := v.Send(ctx, []byte("direct"), 36, 1); err != nil {
				return err
			}
			if err := v.Remap([]VNode{36}, -1); err != nil {
				return err
			}
			if err := v.Send(ctx, []byte("held"), 36, 2); err != nil {
				return err
			}
			if n := v.Held(36); n != 1 {
				return fmt.Errorf("Held(36) = %d after a send to an unmapped node, want 1", n)
			}
			// Tell rank 3 to take node 36 (after the unmapping, in
			// order on this pair).
			return c.Send(ctx, nil, 3, 9)
		case 2:
			st, err := v.Recv(ctx, buf, 36, AnyTag)
			if err != nil || string(buf[:st.Count]) != "direct" || st.VNode != 36 || st.Source != 1 {
				return fmt.Errorf("rank 2: %v %+v %q", err, st, buf[:st.Count])
			}
		case 3:
			if _, err := c.Recv(ctx, nil, 1, 9); err != nil {
				return err
			}
			if err := v.Remap([]VNode{36}, 3); err != nil {
				return err
			}
			st, err := v.Recv(ctx, buf, AnyVNode, AnyTag)
			if err != nil || string(buf[:st.Count]) != "held" || st.VNode != 36 || st.Tag != 2 {
				return fmt.Errorf("rank 3: %v %+v %q", err, st, buf[:st.Count])
			}
		}
		return nil
	})
}

// Phoenix §5.1: after a process dies, exactly its virtual nodes are broken
// (ph_exist_broken_vps, ph_get_broken_vps) until they are remapped; a
// message to a broken node is held and delivered after the remap; a virtual
// receive fails on the failure until it is acknowledged (ph_recv's
// PH_MSG_ERROR).
func TestVirtualBrokenUntilRemapped(t *testing.T) {
	const n, victim = 4, 2
	ss := job(t, n, detecting)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	vs := make([]*Virtual, n)
	for r, s := range ss {
		v, err := s.World().Virtual(64)
		if err != nil {
			t.Fatal(err)
		}
		vs[r] = v
	}
	if vs[0].AnyBroken(vrange(0, 64)...) {
		t.Fatal("broken virtual nodes before any failure")
	}
	// Rank 1 waits on a virtual receive when rank 2 dies.
	pending := make(chan error, 1)
	go func() {
		_, err := vs[1].Recv(ctx, make([]byte, 8), AnyVNode, 5)
		pending <- err
	}()
	ss[victim].kill()
	for r := range n {
		if r == victim {
			continue
		}
		select {
		case <-ss[r].Failures():
		case <-ctx.Done():
			t.Fatalf("rank %d never learnt of the failure", r)
		}
		v := vs[r]
		if got, want := v.BrokenIn(0, 64), vrange(32, 48); !slices.Equal(got, want) {
			t.Errorf("rank %d: BrokenIn(0, 64) = %v, want %v", r, got, want)
		}
		if got := v.Broken([]VNode{1, 33, 40, 50, 47}); !slices.Equal(got, []VNode{33, 40, 47}) {
			t.Errorf("rank %d: Broken = %v, want [33 40 47]", r, got)
		}
		if !v.AnyBroken(36) || v.AnyBroken(0, 16, 31, 48, 63) {
			t.Errorf("rank %d: AnyBroken wrong", r)
		}
	}
	if err := <-pending; !slices.Equal(failedRanks(err), []int{victim}) {
		t.Errorf("pending virtual receive: %v, want rank %d failed", err, victim)
	}
	// Rank 0 sends to a broken node: held.
	if err := vs[0].Send(ctx, []byte("to 40"), 40, 5); err != nil {
		t.Fatal(err)
	}
	if vs[0].Held(40) != 1 {
		t.Fatalf("a message to a broken node was not held")
	}
	if err := vs[0].Remap(vrange(32, 48), victim); !errors.Is(err, ErrProcFailed) {
		t.Errorf("Remap to the dead rank: %v", err)
	}
	// Rank 3 takes the dead rank's nodes; everyone learns it.
	if err := vs[3].Remap(vrange(32, 48), 3); err != nil {
		t.Fatal(err)
	}
	ss[3].World().AckFailed()
	buf := make([]byte, 8)
	st, err := vs[3].Recv(ctx, buf, AnyVNode, 5)
	if err != nil || string(buf[:st.Count]) != "to 40" || st.VNode != 40 || st.Source != 0 {
		t.Fatalf("the held message after the remap: %v %+v %q", err, st, buf[:st.Count])
	}
	// Rank 0 learnt the remap (its held message went out because of it),
	// and rank 3 made it.
	for _, r := range []int{0, 3} {
		if b := vs[r].BrokenIn(0, 64); len(b) != 0 {
			t.Errorf("rank %d: %v still broken after the remap", r, b)
		}
	}
	// Rank 1's message to node 33 reaches rank 3 only once rank 1 knows
	// the remap (before, it would be held).
	if err := vs[1].Send(ctx, []byte("from 1"), 33, 6); err != nil {
		t.Fatal(err)
	}
	if st, err := vs[3].Recv(ctx, buf, 33, 6); err != nil || st.Source != 1 {
		t.Fatalf("rank 1 → node 33 after the remap: %v %+v", err, st)
	}
	if b := vs[1].BrokenIn(0, 64); len(b) != 0 {
		t.Errorf("rank 1: %v still broken after the remap", b)
	}
}

// Bad input of the virtual layer.
func TestVirtualBadInput(t *testing.T) {
	ss := job(t, 2)
	c := ss[0].World()
	ctx := context.Background()
	if _, err := c.Virtual(1); !errors.Is(err, ErrBadArg) {
		t.Errorf("Virtual(1) for 2 ranks: %v", err)
	}
	v, err := c.Virtual(1 << 40)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Virtual(1 << 41); !errors.Is(err, ErrBadArg) {
		t.Errorf("a second Virtual with another space: %v", err)
	}
	if err := v.Send(ctx, nil, 1<<40, 0); !errors.Is(err, ErrRank) {
		t.Errorf("Send outside the space: %v", err)
	}
	if err := v.Send(ctx, nil, 5, -1); !errors.Is(err, ErrTag) {
		t.Errorf("Send with a negative tag: %v", err)
	}
	if err := v.Remap([]VNode{3}, 7); !errors.Is(err, ErrRank) {
		t.Errorf("Remap to rank 7: %v", err)
	}
	if r, _ := v.Owner(1<<39 - 1); r != 0 {
		t.Errorf("Owner(2^39-1) = %d, want 0", r)
	}
	if r, _ := v.Owner(1 << 39); r != 1 {
		t.Errorf("Owner(2^39) = %d, want 1", r)
	}
}
