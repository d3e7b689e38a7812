// Command escape is a job that tries to break out of its confinement on a
// peer daemon, for TestJobEscape. Each attempt prints a line
//
//	ATTEMPT NAME ESCAPED|REFUSED DETAIL
//
// and the test wants every one REFUSED. Modes:
//
//	escape victim                        print "VICTIM pid=P dir=D uid=U", keep a secret file, sleep
//	escape attack PID DIR KEY            attack the victim (PID, DIR) and the daemon's key file KEY
//	escape detach                        start a lingering process in a session of its own, print its pid
//	escape forkbomb N                    start N sleeping processes, print "+" for each that started
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: escape victim|attack|detach|forkbomb ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "victim":
		victim()
	case "attack":
		if len(os.Args) != 5 {
			fmt.Fprintln(os.Stderr, "usage: escape attack PID DIR KEY")
			os.Exit(2)
		}
		attack(os.Args[2], os.Args[3], os.Args[4])
	case "detach":
		detach()
	case "forkbomb":
		n, _ := strconv.Atoi(os.Args[2])
		forkbomb(n)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", os.Args[1])
		os.Exit(2)
	}
}

func victim() {
	dir, _ := os.Getwd()
	if err := os.WriteFile("secret.txt", []byte("the victim's secret\n"), 0o600); err != nil {
		fmt.Println("victim: cannot write its secret:", err)
	}
	fmt.Printf("VICTIM pid=%d dir=%s uid=%d\n", os.Getpid(), dir, os.Getuid())
	sleepForever()
}

// sleepForever blocks (a bare select{} would be taken for a deadlock).
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func report(name string, escaped bool, detail any) {
	verdict := "REFUSED"
	if escaped {
		verdict = "ESCAPED"
	}
	fmt.Printf("ATTEMPT %s %s %v\n", name, verdict, detail)
}

// readAttempt reads a file: escaped if anything was read.
func readAttempt(name, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		report(name, false, err)
		return
	}
	report(name, len(b) > 0, fmt.Sprintf("read %d bytes of %s", len(b), path))
}

func attack(pidArg, victimDir, key string) {
	pid, err := strconv.Atoi(pidArg)
	if err != nil {
		fmt.Println("attack: bad pid", pidArg)
		os.Exit(2)
	}
	dir, _ := os.Getwd()
	fmt.Printf("ATTACKER pid=%d dir=%s uid=%d\n", os.Getpid(), dir, os.Getuid())

	readAttempt("daemon-key", key)
	readAttempt("victim-environ", fmt.Sprintf("/proc/%d/environ", pid))
	readAttempt("victim-file", filepath.Join(victimDir, "secret.txt"))
	if ents, err := os.ReadDir(victimDir); err != nil {
		report("victim-dir", false, err)
	} else {
		report("victim-dir", true, fmt.Sprintf("listed %d entries", len(ents)))
	}
	if ents, err := os.ReadDir(filepath.Dir(dir)); err != nil {
		report("work-dir", false, err)
	} else {
		report("work-dir", true, fmt.Sprintf("listed %d job directories", len(ents)))
	}
	daemon := os.Getppid()
	readAttempt("daemon-environ", fmt.Sprintf("/proc/%d/environ", daemon))
	if err := syscall.Kill(daemon, 0); err != nil {
		report("signal-daemon", false, err)
	} else {
		report("signal-daemon", true, fmt.Sprintf("may signal the daemon (pid %d)", daemon))
	}
	runtime.LockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		report("ptrace-victim", false, err)
	} else {
		syscall.PtraceDetach(pid)
		report("ptrace-victim", true, "attached")
	}
	runtime.UnlockOSThread()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		report("kill-victim", false, err)
	} else {
		report("kill-victim", true, "SIGKILL delivered")
	}
	nnp := "no NoNewPrivs line"
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for l := range strings.Lines(string(b)) {
			if strings.HasPrefix(l, "NoNewPrivs:") {
				nnp = strings.TrimSpace(l)
			}
		}
	}
	report("new-privileges", nnp != "NoNewPrivs:\t1", nnp)

	// A process in a session of its own, detached from the job's process
	// group: whether it outlives the job the test sees.
	out, err := exec.Command(os.Args[0], "detach").Output()
	if err != nil {
		fmt.Println("DETACH failed:", err)
	} else {
		fmt.Print(string(out))
	}

	const tries = 256
	cmd := exec.Command(os.Args[0], "forkbomb", strconv.Itoa(tries))
	stdout, _ := cmd.StdoutPipe()
	started := 0
	var why string
	if err := cmd.Start(); err != nil {
		why = err.Error()
	} else {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "+" {
				started++
			} else if why == "" {
				why = sc.Text()
			}
		}
		if err := cmd.Wait(); err != nil && why == "" {
			why = err.Error()
		}
	}
	report("fork-bomb", started >= tries, fmt.Sprintf("%d of %d processes started (%s)", started, tries, why))
	fmt.Println("ATTEMPTS DONE")
}

// detach starts a lingering grandchild in a new session, with no tie to
// the job's output, prints its pid and exits: a daemonized process. The
// grandchild is sleep(1), one thread: a Go program would start threads
// after it is detached, and the fork bomb that follows at pids.max would
// kill it by refusing it one (the Go runtime dies then), before the job's
// stop could show that the stop kills it.
func detach() {
	devnull, _ := os.Open(os.DevNull)
	cmd := exec.Command("sleep", "3600")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Println("DETACH failed:", err)
		os.Exit(1)
	}
	fmt.Printf("DETACHED pid=%d\n", cmd.Process.Pid)
}

// forkbomb starts up to n sleeping processes, then ends them.
func forkbomb(n int) {
	var cmds []*exec.Cmd
	failed := 0
	for range n {
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			if failed == 0 {
				fmt.Println("refused:", err)
			}
			failed++
			time.Sleep(time.Millisecond)
			continue
		}
		fmt.Println("+")
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		c.Process.Kill()
		c.Wait()
	}
}
