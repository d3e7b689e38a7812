//go:build !linux

package tcp

import "errors"

// singleCopySupported: process_vm_readv is Linux's.
const singleCopySupported = false

var errPeerEnded = errors.New("the process ended")

func readPeer(int, []byte, uint64) (int, error) { return 0, errors.ErrUnsupported }

func allowPeerReads() {}

func adviseHuge([]byte) {}
