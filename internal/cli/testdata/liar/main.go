// Command liar is a test program of `cohort chaos`: a job that registers
// with the launcher like a comm program, lives for 300 ms and exits with
// status 0 on every rank. Rank 0 prints the right N-Queens count in the
// first job that uses the state file given as argument (the chaos
// baseline) and a wrong one, saying WRONG, in every later job (the chaos
// runs): a campaign that trusted exit statuses alone would call it correct.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

func main() {
	boot, err := launch.FromEnv(os.Getenv)
	if err != nil || len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "liar: run me with cohort chaos … liar STATEFILE", err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "liar:", err)
		os.Exit(1)
	}
	defer ln.Close()
	reg, err := boot.Register(context.Background(), ln.Addr().String())
	if err != nil {
		fmt.Fprintln(os.Stderr, "liar:", err)
		os.Exit(1)
	}
	defer reg.Close()
	time.Sleep(300 * time.Millisecond) // long enough to be killed
	if boot.Rank != 0 {
		return
	}
	state := os.Args[1]
	_, statErr := os.Stat(state)
	if os.IsNotExist(statErr) {
		os.WriteFile(state, []byte("ran\n"), 0o644)
		fmt.Println("nqueens n=8 mode=steal ranks=4: 92 solutions in 0.001s (known 92): CORRECT")
		return
	}
	fmt.Println("nqueens n=8 mode=steal ranks=4: 91 solutions in 0.001s (known 92): WRONG")
}
