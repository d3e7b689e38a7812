//go:build !linux

package comm

import (
	"errors"
	"sync/atomic"
	"time"
)

// segSupported: the collectives' shared segment needs Linux's memfds and
// futexes; elsewhere collectives go over the transport.
const segSupported = false

var errNoSegment = errors.New("no shared-memory segments on this system")

func createSegment(int) (int, []byte, error)                { return -1, nil, errNoSegment }
func openSegment(int, int, int) ([]byte, error)             { return nil, errNoSegment }
func unmapSegment([]byte)                                   {}
func closeSegmentFD(int)                                    {}
func segPid() int                                           { return 0 }
func futexWait(*atomic.Uint32, uint32, time.Duration, bool) {}
func futexWake(*atomic.Uint32)                              {}

// voluntarySwitches is not read here: settleRuntime returns at once.
func voluntarySwitches() (int64, bool) { return 0, false }
