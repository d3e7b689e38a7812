//go:build !unix

package launch

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func isolate(cmd *exec.Cmd) {}

// signalGroup kills p: other systems have no SIGTERM to send.
func signalGroup(p *os.Process, sig syscall.Signal) error { return p.Kill() }

func exitSignal(ps *os.ProcessState) syscall.Signal { return 0 }

func signalName(sig syscall.Signal) string { return fmt.Sprintf("signal %d (%v)", int(sig), sig) }
