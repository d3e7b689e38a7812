//go:build !linux

package tcp

import (
	"errors"
	"net"
)

// shmSupported: the shared-memory path needs Linux's sealed memfds.
const shmSupported = false

var errNoShm = errors.New("shared memory rings need Linux")

func createRing(int) (int, []byte, error)          { return -1, nil, errNoShm }
func mapRing(int, uint64) ([]byte, error)          { return nil, errNoShm }
func unmapRing([]byte)                             {}
func closeFD(int)                                  {}
func writeWithFD(*net.UnixConn, []byte, int) error { return errNoShm }

// rightsConn exists only on Linux; elsewhere no connection is one.
type rightsConn struct{ *net.UnixConn }

func (*rightsConn) take() []int      { return nil }
func (*rightsConn) startCollecting() {}
func (*rightsConn) stopCollecting()  {}

func handshakeConn(nc net.Conn) net.Conn { return nc }

func osYield() {}
