package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakePMI is a PMI-2 server speaking the wire protocol as SLURM 22.05's
// slurmstepd does (the init line, then length-prefixed messages), for a
// step of size tasks. Its parsing is written here independently of the
// client's, so that a shared misreading of the protocol cannot hide.
type fakePMI struct {
	size int

	mu      sync.Mutex
	kv      map[string]string
	pending map[string]string // put but not yet fenced
	fenced  int
	gen     chan struct{} // closed when the current fence completes
	quit    chan struct{} // closed by stop: waiting fences end
	once    sync.Once
}

// stop ends every fence still waiting (the server goes away).
func (f *fakePMI) stop() { f.once.Do(func() { close(f.quit) }) }

func newFakePMI(size int) *fakePMI {
	return &fakePMI{size: size, kv: map[string]string{}, pending: map[string]string{}, gen: make(chan struct{}), quit: make(chan struct{})}
}

// serve answers one task (global rank rank) on conn until it finalizes
// or the connection ends.
func (f *fakePMI) serve(conn net.Conn, rank int) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	if line != "cmd=init pmi_version=2 pmi_subversion=0\n" {
		fmt.Fprintf(conn, "cmd=response_to_init rc=1 pmi_version=2 pmi_subversion=0\n")
		return
	}
	io.WriteString(conn, "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	for {
		var lenBuf [6]byte
		if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
			return
		}
		n, err := strconv.Atoi(strings.TrimRight(string(lenBuf[:]), " "))
		if err != nil {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		kv := map[string]string{}
		for _, field := range strings.Split(strings.TrimSuffix(string(body), ";"), ";") {
			k, v, _ := strings.Cut(field, "=")
			kv[k] = v
		}
		reply := func(s string) { fmt.Fprintf(conn, "%-6d%s", len(s), s) }
		switch kv["cmd"] {
		case "fullinit":
			reply(fmt.Sprintf("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=%d;size=%d;appnum=-1;debugged=FALSE;pmiverbose=FALSE;", rank, f.size))
		case "job-getid":
			reply("cmd=job-getid-response;rc=0;jobid=7.0;")
		case "kvs-put":
			f.mu.Lock()
			f.pending[kv["key"]] = kv["value"]
			f.mu.Unlock()
			reply("cmd=kvs-put-response;rc=0;")
		case "kvs-fence":
			f.mu.Lock()
			f.fenced++
			gen := f.gen
			if f.fenced == f.size {
				for k, v := range f.pending {
					f.kv[k] = v
				}
				f.pending = map[string]string{}
				f.fenced = 0
				close(f.gen)
				f.gen = make(chan struct{})
			}
			f.mu.Unlock()
			select {
			case <-gen:
			case <-f.quit:
				return
			}
			reply("cmd=kvs-fence-response;rc=0;")
		case "kvs-get":
			f.mu.Lock()
			v, ok := f.kv[kv["key"]]
			f.mu.Unlock()
			if ok {
				reply("cmd=kvs-get-response;rc=0;found=TRUE;value=" + v + ";")
			} else {
				reply("cmd=kvs-get-response;rc=0;found=FALSE;")
			}
		case "finalize":
			reply("cmd=finalize-response;rc=0;")
			return
		default:
			reply("cmd=" + kv["cmd"] + "-response;rc=14;errmsg=unknown command;")
		}
	}
}

// slurmEnv is the environment srun gives task rank of size (one node).
func slurmEnv(rank, size int) map[string]string {
	return map[string]string{
		"PMI_FD": "3", "PMI_RANK": strconv.Itoa(rank), "PMI_SIZE": strconv.Itoa(size), "PMI_JOBID": "7.0",
		"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": strconv.Itoa(rank),
		"SLURM_STEP_NUM_TASKS": strconv.Itoa(size), "SLURM_STEP_NUM_NODES": "1", "SLURM_CLUSTER_NAME": "test",
		EnvUserSecret: "a user secret of some length",
	}
}

// fakeSystem is a machine whose PMI descriptor is conn.
func fakeSystem(env map[string]string, conn func() (net.Conn, error)) system {
	return system{
		getenv:     func(k string) string { return env[k] },
		hostname:   func() (string, error) { return "node1", nil },
		lookupIP:   func(context.Context, string) ([]net.IP, error) { return nil, errors.New("no DNS here") },
		ifaceAddrs: func() ([]net.Addr, error) { return nil, nil },
		readFile:   os.ReadFile,
		stat:       os.Stat,
		uid:        os.Getuid(),
		openPMI: func(fd string, timeout time.Duration) (pmiServer, error) {
			c, err := conn()
			if err != nil {
				return nil, err
			}
			return NewPMIClient(c, 2*time.Second), nil
		},
	}
}

// TestSlurmBootstrapExchange runs a step of four tasks against the fake
// server: each learns its rank and size from PMI, the same job name and
// secret, and after Register every task's address.
func TestSlurmBootstrapExchange(t *testing.T) {
	for _, size := range []int{1, 4, 150} { // 150 addresses take several 1 KiB table chunks
		t.Run(strconv.Itoa(size), func(t *testing.T) { testExchange(t, size) })
	}
	if got := chunkTable([]string{"a:1", "b:2", "c:3"}, 7); strings.Join(got, "|") != "a:1,b:2|c:3" {
		t.Errorf("chunkTable: %q", got)
	}
}

func testExchange(t *testing.T, size int) {
	srv := newFakePMI(size)
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		b     Bootstrap
		addrs []string
		err   error
	}
	results := make([]result, size)
	var wg sync.WaitGroup
	for r := 0; r < size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sys := fakeSystem(slurmEnv(r, size), func() (net.Conn, error) {
				a, b := net.Pipe()
				go srv.serve(b, r)
				return a, nil
			})
			b, err := fromSLURM(ctx, sys)
			if err != nil {
				results[r].err = err
				return
			}
			reg, err := b.Register(ctx, fmt.Sprintf("127.0.0.1:%d", 4000+b.Rank))
			if err != nil {
				results[r].err = err
				return
			}
			results[r] = result{b: b, addrs: reg.Addrs}
			if err := reg.Close(); err != nil {
				t.Errorf("rank %d: Close: %v", r, err)
			}
		}()
	}
	wg.Wait()
	for r, res := range results {
		if res.err != nil {
			t.Fatalf("rank %d: %v", r, res.err)
		}
		if res.b.Rank != r || res.b.Size != size {
			t.Errorf("rank %d: got rank %d size %d", r, res.b.Rank, res.b.Size)
		}
		if res.b.JobID != "slurm-test-7.0" || res.b.Source != "SLURM PMI-2" || res.b.Listen != "127.0.0.1" {
			t.Errorf("rank %d: job %q source %q listen %q", r, res.b.JobID, res.b.Source, res.b.Listen)
		}
		if string(res.b.Secret) != string(results[0].b.Secret) {
			t.Errorf("rank %d derived another secret than rank 0", r)
		}
		for q, a := range res.addrs {
			if want := fmt.Sprintf("127.0.0.1:%d", 4000+q); a != want {
				t.Errorf("rank %d: address of rank %d is %q, want %q", r, q, a, want)
			}
		}
	}
}

// TestSlurmExchangeStranger: a task of the step that is not a cohort
// program (it fences but puts no address): task 0 cannot build the table,
// and every task's error says why instead of waiting.
func TestSlurmExchangeStranger(t *testing.T) {
	srv := newFakePMI(3)
	defer srv.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := net.Pipe()
			go srv.serve(b, r)
			if r == 2 { // the stranger
				c := NewPMIClient(a, time.Second)
				defer c.Close()
				if err := c.Init(ctx, r, "7.0"); err == nil {
					c.Fence(ctx, 5*time.Second)
					c.Fence(ctx, 5*time.Second)
				}
				return
			}
			boot, err := fromSLURM(ctx, fakeSystem(slurmEnv(r, 3), func() (net.Conn, error) { return a, nil }))
			if err == nil {
				_, err = boot.Register(ctx, fmt.Sprintf("127.0.0.1:%d", 4000+r))
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	for r := 0; r < 2; r++ {
		if errs[r] == nil || !strings.Contains(errs[r].Error(), "task 2 published no address") {
			t.Errorf("task %d: %v, want an error naming task 2", r, errs[r])
		}
	}
}

// pipeServer runs answer on the server end of a pipe and returns a client
// on the other end.
func pipeServer(t *testing.T, timeout time.Duration, answer func(r *bufio.Reader, w net.Conn)) *PMIClient {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer b.Close()
		answer(bufio.NewReader(b), b)
	}()
	t.Cleanup(func() { a.Close(); <-done })
	return NewPMIClient(a, timeout)
}

// okInit answers the init line as SLURM does.
func okInit(r *bufio.Reader, w net.Conn) bool {
	if _, err := r.ReadString('\n'); err != nil {
		return false
	}
	_, err := io.WriteString(w, "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
	return err == nil
}

// skipMsg reads one length-prefixed request.
func skipMsg(r *bufio.Reader) bool {
	var l [6]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return false
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(l[:])))
	_, err := io.ReadFull(r, make([]byte, n))
	return err == nil
}

// TestPMIBadServer: a server that answers garbage, refuses, closes or
// hangs gives Init an error that says so, within the client's bound.
func TestPMIBadServer(t *testing.T) {
	full := func(s string) string { return fmt.Sprintf("%-6d%s", len(s), s) }
	cases := []struct {
		name   string
		answer func(r *bufio.Reader, w net.Conn)
		want   string
	}{
		{"garbage init answer", func(r *bufio.Reader, w net.Conn) {
			r.ReadString('\n')
			io.WriteString(w, "hello there\n")
		}, "bad answer to init"},
		{"init refused", func(r *bufio.Reader, w net.Conn) {
			r.ReadString('\n')
			io.WriteString(w, "cmd=response_to_init rc=1 pmi_version=1 pmi_subversion=1\n")
		}, "refused PMI version 2.0"},
		{"endless init line", func(r *bufio.Reader, w net.Conn) {
			r.ReadString('\n')
			io.WriteString(w, strings.Repeat("x", 1000))
		}, "without a newline"},
		{"closed at once", func(r *bufio.Reader, w net.Conn) {}, "closed the connection"},
		{"hangs", func(r *bufio.Reader, w net.Conn) {
			r.ReadString('\n')
			io.Copy(io.Discard, r)
		}, "did not answer within"},
		{"bad length field", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, "12x   cmd=x;")
			}
		}, "not a decimal number"},
		{"huge length", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, "999999")
			}
		}, "want 1 to"},
		{"truncated body", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, "40    cmd=fullinit-response;rc=0;")
			}
		}, "closed the connection"},
		{"no cmd", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("rc=0;cmd=fullinit-response;"))
			}
		}, "does not begin with cmd="},
		{"unterminated value", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("cmd=fullinit-response;rc=0"))
			}
		}, "not terminated"},
		{"wrong answer", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("cmd=kvs-put-response;rc=0;"))
			}
		}, `want "fullinit-response"`},
		{"error rc", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("cmd=fullinit-response;rc=3;errmsg=no such task;"))
			}
		}, "no such task"},
		{"other rank", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("cmd=fullinit-response;rc=0;rank=2;size=4;"))
			}
		}, "PMI_RANK says 1"},
		{"size zero", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("cmd=fullinit-response;rc=0;rank=1;size=0;"))
			}
		}, "size=0"},
		{"no size", func(r *bufio.Reader, w net.Conn) {
			if okInit(r, w) && skipMsg(r) {
				io.WriteString(w, full("cmd=fullinit-response;rc=0;rank=1;"))
			}
		}, "has no size"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := pipeServer(t, 200*time.Millisecond, tc.answer)
			err := c.Init(context.Background(), 1, "7.0")
			if err == nil {
				t.Fatal("Init succeeded")
			}
			if !errors.Is(err, ErrPMI) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an ErrPMI saying %q", err, tc.want)
			}
		})
	}
}

// TestPMIFenceIncomplete: a step of three tasks of which two arrive (the
// third died, or the size is wrong): the fence gives up after its bound
// with an error that says what happened, and a cancelled context ends it
// at once.
func TestPMIFenceIncomplete(t *testing.T) {
	srv := newFakePMI(3)
	defer srv.stop()
	clients := make([]*PMIClient, 2)
	for r := range clients {
		a, b := net.Pipe()
		go srv.serve(b, r)
		clients[r] = NewPMIClient(a, time.Second)
		defer clients[r].Close()
		if err := clients[r].Init(context.Background(), r, "7.0"); err != nil {
			t.Fatal(err)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- clients[0].Fence(context.Background(), 150*time.Millisecond) }()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "not all 3 tasks reached it") {
			t.Fatalf("got %v, want the fence's bound to say not all 3 tasks came", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the fence did not give up")
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- clients[1].Fence(ctx, time.Hour) }()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a cancelled fence did not return")
	}
}

// TestPMIRefusesUnsendable: what SLURM could not read back is refused
// before it is sent.
func TestPMIRefusesUnsendable(t *testing.T) {
	c := NewPMIClient(nil, time.Second) // nothing reaches the connection
	for _, kv := range [][2]string{{"", "v"}, {"a=b", "v"}, {"k", "x;y"}, {"k", "x\ny"}, {strings.Repeat("k", 65), "v"}, {"k", strings.Repeat("v", 1025)}} {
		if err := c.Put(context.Background(), kv[0], kv[1]); err == nil || !errors.Is(err, ErrPMI) {
			t.Errorf("Put(%q, %q) = %v, want an ErrPMI", kv[0], kv[1], err)
		}
	}
}

// TestPMIFromFD opens a real socket descriptor, and refuses what is not
// one.
func TestPMIFromFD(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Skip("no socketpair:", err)
	}
	peer := os.NewFile(uintptr(fds[1]), "peer")
	defer peer.Close()
	c, err := PMIFromFD(strconv.Itoa(fds[0]), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fds[0]) // the client holds its own copy
	pc, err := net.FileConn(peer)
	if err != nil {
		t.Fatal(err)
	}
	srv := newFakePMI(1)
	go srv.serve(pc, 0)
	if err := c.Init(context.Background(), 0, "7.0"); err != nil {
		t.Fatal(err)
	}
	if c.Rank() != 0 || c.Size() != 1 || c.JobID() != "7.0" {
		t.Errorf("rank %d size %d job %q", c.Rank(), c.Size(), c.JobID())
	}
	if err := c.Finalize(context.Background()); err != nil {
		t.Fatal(err)
	}

	f, err := os.CreateTemp(t.TempDir(), "notasocket")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := PMIFromFD("1000", time.Second); err == nil || !strings.Contains(err.Error(), "not an open descriptor") {
		t.Errorf("a closed descriptor: %v", err)
	}
	for _, fd := range []string{"x", "-1", strconv.Itoa(int(f.Fd()))} {
		if _, err := PMIFromFD(fd, time.Second); err == nil || !errors.Is(err, ErrPMI) {
			t.Errorf("PMIFromFD(%q) = %v, want an ErrPMI", fd, err)
		}
	}
}

func TestParsePMI2(t *testing.T) {
	m, err := parsePMI2("cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b=c;;;")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.get("value"); got != "a;b=c;" {
		t.Errorf("value %q, want %q (;; is an escaped ;)", got, "a;b=c;")
	}
	for _, bad := range []string{"", "cmd", "cmd=x", "=x;", "rc=0;", "cmd=x;junk"} {
		if _, err := parsePMI2(bad); err == nil {
			t.Errorf("parsePMI2(%q) succeeded", bad)
		}
	}
	if got, want := string(encodePMI2([]pair{{"cmd", "kvs-fence"}})), "14    cmd=kvs-fence;"; got != want {
		t.Errorf("encode: %q, want %q", got, want)
	}
}

// FuzzParsePMI2: any message body parses or fails with an error, never a
// panic; what parses begins with cmd and survives a round trip when its
// values hold no ';'.
func FuzzParsePMI2(f *testing.F) {
	for _, s := range []string{
		"cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=0;size=4;appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
		"cmd=kvs-get-response;rc=0;found=TRUE;value=127.0.0.1:4000;",
		"cmd=kvs-fence-response;rc=1;errmsg=mpi/pmi2: failed to send temp kvs;",
		"cmd=x;v=;;;", "cmd=;", "", "=", ";;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		m, err := parsePMI2(body)
		if err != nil {
			return
		}
		if len(m.pairs) == 0 || m.pairs[0].k != "cmd" {
			t.Fatalf("parsed %q without a leading cmd", body)
		}
		for _, p := range m.pairs {
			if strings.Contains(p.v, ";") {
				return
			}
		}
		enc := encodePMI2(m.pairs)
		back, err := readPMI2(bufio.NewReader(strings.NewReader(string(enc))))
		if err != nil {
			t.Fatalf("re-read of %q: %v", enc, err)
		}
		m2, err := parsePMI2(back)
		if err != nil || len(m2.pairs) != len(m.pairs) {
			t.Fatalf("round trip of %q: %v, %d pairs", body, err, len(m2.pairs))
		}
	})
}

// FuzzPMIClient: whatever bytes a server sends, Init returns (an error or
// success with a sane rank and size), never panics or hangs.
func FuzzPMIClient(f *testing.F) {
	good := "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n"
	msg := func(s string) string { return fmt.Sprintf("%-6d%s", len(s), s) }
	f.Add(good + msg("cmd=fullinit-response;rc=0;rank=1;size=4;") + msg("cmd=job-getid-response;rc=0;jobid=7.0;"))
	f.Add(good + msg("cmd=fullinit-response;rc=0;rank=1;size=4;"))
	f.Add(good + "000000")
	f.Add("cmd=response_to_init rc=0\n")
	f.Add("\n\n")
	f.Fuzz(func(t *testing.T, reply string) {
		a, b := net.Pipe()
		go func() {
			defer b.Close()
			go io.Copy(io.Discard, b)
			io.WriteString(b, reply)
		}()
		c := NewPMIClient(a, 100*time.Millisecond)
		defer c.Close()
		if err := c.Init(context.Background(), 1, "7.0"); err == nil {
			if c.Rank() != 1 || c.Size() < 2 || c.Size() > MaxSize || c.JobID() == "" {
				t.Fatalf("Init accepted rank %d size %d job %q from %q", c.Rank(), c.Size(), c.JobID(), reply)
			}
		}
	})
}
