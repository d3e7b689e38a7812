package tcp

import "testing"

// A reset or drop of the log while lent frames are being written leaves
// their releases for the end of the last write, not the first: the next
// lent frame's write begins under the peer's wmu before the previous
// one's written (after wmu), and its body must stay put until its own
// write ends. Every release then runs exactly once.
func TestSendLogWrittenOverlap(t *testing.T) {
	for _, drop := range []bool{false, true} {
		const stream = 7
		l := newSendLog(minResendBuffer)
		l.bind(stream)
		var released [2]int
		head := []byte{0}
		for i := range released {
			if ok, kept := l.addLent(stream, head, make([]byte, LendMin), func() { released[i]++ }); !ok || !kept {
				t.Fatalf("frame %d: addLent reported ok %v kept %v", i, ok, kept)
			}
		}
		l.written() // the first frame's write ends; the second's goes on
		if drop {
			l.drop()
		} else {
			l.reset(stream + 1)
		}
		if released != [2]int{} {
			t.Fatalf("drop %v: released %v while a lent frame was being written", drop, released)
		}
		l.written()
		if released != [2]int{1, 1} {
			t.Fatalf("drop %v: released %v after the writes ended, want [1 1]", drop, released)
		}
	}
}
