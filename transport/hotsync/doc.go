// Package hotsync holds the synchronization that comm and transport/tcp
// share on the message path, where a locked instruction is a sizeable
// part of a small message's cost on one host (docs/DESIGN.md, "Hot
// paths"): a mutex whose Unlock is a release store, release stores that
// are plain moves where the processor keeps stores in order, and a yield
// of the thread to the host's other threads.
package hotsync
