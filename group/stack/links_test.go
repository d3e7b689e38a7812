package stack_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cohort-mp/cohort/core"
	"github.com/cohort-mp/cohort/group/stack"
	"github.com/cohort-mp/cohort/topo"
)

// TreeLinks holds every member's parent and children in the view's radix
// tree and in the next view after any one departure (the root's included),
// for every size up to 70, fan-outs 2, 4 and 8, and every member; at most
// 2 + 2·fanout links, never the member itself.
func TestTreeLinks(t *testing.T) {
	neighbours := func(members []core.NodeID, self core.NodeID, a int) []core.NodeID {
		r, err := topo.NewRadix(len(members), a)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index(members, self)
		var out []core.NodeID
		if p := r.Parent(i); p != topo.None {
			out = append(out, members[p])
		}
		for _, c := range r.AppendChildren(nil, i) {
			out = append(out, members[c])
		}
		return out
	}
	for _, a := range []int{2, 4, 8} {
		for n := 1; n <= 70; n++ {
			members := make([]core.NodeID, n)
			for k := range members {
				members[k] = core.NodeID(100 + 3*k) // not their positions
			}
			for _, self := range members {
				links := stack.TreeLinks(members, self, a)
				what := fmt.Sprintf("a = %d, n = %d, %v: links %v", a, n, self, links)
				if len(links) > 2+2*a || slices.Contains(links, self) {
					t.Fatalf("%s: more than %d, or itself", what, 2+2*a)
				}
				for _, w := range neighbours(members, self, a) {
					if !slices.Contains(links, w) {
						t.Fatalf("%s: lacks %v, a neighbour in this view", what, w)
					}
				}
				for gone := range members {
					if members[gone] == self {
						continue
					}
					next := slices.Delete(slices.Clone(members), gone, gone+1)
					for _, w := range neighbours(next, self, a) {
						if !slices.Contains(links, w) {
							t.Fatalf("%s: lacks %v, a neighbour once %v left", what, w, members[gone])
						}
					}
				}
			}
		}
	}
	if l := stack.TreeLinks([]core.NodeID{1, 2}, 3, 4); l != nil {
		t.Errorf("links of a non-member: %v", l)
	}
	if l := stack.TreeLinks([]core.NodeID{1, 2}, 1, 3); l != nil {
		t.Errorf("links with fan-out 3: %v", l)
	}
}
