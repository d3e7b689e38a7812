// Command rank is the test program of package launch: a rank that reads
// its bootstrap, listens, registers, prints what it got and exits as its
// flags say.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cohort-mp/cohort/launch"
)

func main() {
	code := flag.Int("code", 0, "exit code of every rank")
	failRank := flag.Int("fail-rank", -1, "this rank exits with -fail-code")
	failCode := flag.Int("fail-code", 7, "exit code of -fail-rank")
	early := flag.Int("early-rank", -1, "this rank exits with code 3 before registering")
	late := flag.Int("late-rank", -1, "this rank never registers and waits to be killed")
	hold := flag.Bool("hold", false, "after registering, wait until the launcher's connection ends")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	lines := flag.Int("lines", 0, "print this many lines after registering")
	noRegister := flag.Bool("no-register", false, "do not register at all; print the rank and exit")
	spin := flag.Duration("spin", 0, "rank 0 computes, after registering, until it has used this much processor time")
	excluded := flag.String("excluded", "", "comma-separated ranks that every other rank reports excluded from the job before it ends")
	stopRank := flag.Int("stop-rank", -1, "this rank stops itself (SIGSTOP) after registering and never ends on its own")
	stopFile := flag.String("stop-file", "", "-stop-rank writes its process id to this file before it stops; the other ranks wait until it is stopped")
	flag.Parse()
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	boot, err := launch.FromEnv(os.Getenv)
	if errors.Is(err, launch.ErrNotLaunched) {
		fmt.Println("not launched")
		os.Exit(4)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
	}
	if strings.Contains(strings.Join(os.Args, " "), fmt.Sprintf("%x", boot.Secret)) {
		fmt.Fprintln(os.Stderr, "the secret is on the command line")
		os.Exit(6)
	}
	if *noRegister {
		fmt.Printf("rank %d of %d\n", boot.Rank, boot.Size)
		os.Exit(*code)
	}
	if boot.Rank == *early {
		os.Exit(3)
	}
	if boot.Rank == *late {
		select {}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(5)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg, err := boot.Register(ctx, ln.Addr().String())
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", boot.Rank, err)
		os.Exit(8)
	}
	if reg.Addrs[boot.Rank] != ln.Addr().String() {
		fmt.Fprintf(os.Stderr, "rank %d: the table lists %s for me, I listen on %s\n", boot.Rank, reg.Addrs[boot.Rank], ln.Addr())
		os.Exit(9)
	}
	sum := sha256.Sum256([]byte(strings.Join(reg.Addrs, ",")))
	fmt.Printf("rank %d of %d job %s detector %q fanout %d table %x\n", boot.Rank, boot.Size, boot.JobID, boot.Detector, boot.Fanout, sum[:8])
	if boot.Rank == 0 && *spin > 0 {
		// Until the kernel has accounted spin of processor time to us,
		// however long that takes on a loaded machine.
		x := uint64(1)
		for cpu(syscall.RUSAGE_SELF) < *spin {
			for range 100000 {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}
		fmt.Fprintln(io.Discard, x)
	}
	pad := strings.Repeat("x", 100)
	for i := range *lines {
		fmt.Printf("rank %d line %d %s\n", boot.Rank, i, pad)
	}
	if boot.Rank == *stopRank {
		if *stopFile != "" {
			os.WriteFile(*stopFile+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600)
			os.Rename(*stopFile+".tmp", *stopFile)
		}
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		select {}
	}
	if *stopFile != "" {
		waitStopped(*stopFile)
	}
	if *excluded != "" {
		var procs []int
		for _, f := range strings.Split(*excluded, ",") {
			p, err := strconv.Atoi(f)
			if err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: -excluded: %v\n", boot.Rank, err)
				os.Exit(5)
			}
			procs = append(procs, p)
		}
		if !slices.Contains(procs, boot.Rank) {
			if err := reg.ReportExcluded(procs); err != nil {
				fmt.Fprintf(os.Stderr, "rank %d: %v\n", boot.Rank, err)
				os.Exit(5)
			}
		}
	}
	if *hold && *ignoreTerm {
		select {} // deaf to the launcher: only SIGKILL ends it
	}
	if *hold {
		select {
		case <-reg.Lost():
			fmt.Fprintf(os.Stderr, "rank %d: lost the launcher: %v\n", boot.Rank, reg.Err())
		case <-time.After(time.Hour):
		}
	}
	reg.Close()
	if boot.Rank == *failRank {
		os.Exit(*failCode)
	}
	os.Exit(*code)
}

// cpu is the processor time (user and system) of who.
func cpu(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitStopped waits until the process whose id is in file (written by
// -stop-rank) is stopped (state T in /proc), at most a minute.
func waitStopped(file string) {
	for range 6000 {
		if pid, err := os.ReadFile(file); err == nil {
			stat, err := os.ReadFile("/proc/" + string(pid) + "/stat")
			// The state follows the command's closing parenthesis.
			if i := strings.LastIndexByte(string(stat), ')'); err == nil && i >= 0 && strings.HasPrefix(string(stat[i:]), ") T") {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "the stopped rank did not stop within a minute")
	os.Exit(5)
}
