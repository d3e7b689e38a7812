package main

import (
	"testing"
	"time"
)

// TestIsolateEachSystem cuts one member of a group of 4 off from every
// other (the cuts a partial partition is made of, all at once): each
// system must remove it from some view, and take it back after the heal.
// This checks that the cuts reach every path a system uses.
func TestIsolateEachSystem(t *testing.T) {
	for _, name := range []string{"heartbeat", "brr", "memberlist"} {
		t.Run(name, func(t *testing.T) {
			s, err := newSystem(name, 20, 1)
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			if err := s.start(4); err != nil {
				t.Fatal(err)
			}
			victim := s.views()[0].name
			for i := 1; i < 4; i++ {
				s.cut(0, i, false)
			}
			err = waitFor(s, 60*time.Second, func() bool {
				for _, v := range s.views()[1:] {
					if !v.members[victim] {
						return true
					}
				}
				return false
			})
			if err != nil {
				t.Fatalf("%s cut off from everyone and still in every other view: %v", victim, err)
			}
			s.heal()
			if err := waitFor(s, 60*time.Second, s.whole); err != nil {
				t.Fatalf("not whole again after the heal: %v", err)
			}
		})
	}
}
