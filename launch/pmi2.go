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
	"time"
)

// The PMI-2 wire protocol, client side, as SLURM's mpi/pmi2 plugin
// (slurmstepd) serves it to the tasks of `srun --mpi=pmi2` over the socket
// whose descriptor is in PMI_FD.
//
// A conversation starts with one line in the PMI-1 format, which chooses the
// version:
//
//	→ cmd=init pmi_version=2 pmi_subversion=0\n
//	← cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n
//
// (slurmstepd reads this first request with a single read of at most 64
// bytes, so nothing else may be sent before its answer arrives). Every later
// message, both ways, is a 6-byte decimal length, left-justified and padded
// with spaces, followed by that many bytes of "key=value;" pairs, the first
// of which is cmd:
//
//	→ 38    cmd=fullinit;pmijobid=1;pmirank=0;threaded=FALSE;
//	← 106   cmd=fullinit-response;rc=0;pmi-version=2;...;rank=0;size=4;...
//	→ cmd=kvs-put;key=K;value=V;          ← cmd=kvs-put-response;rc=0;
//	→ cmd=kvs-fence;                      ← cmd=kvs-fence-response;rc=0;
//	→ cmd=kvs-get;jobid=J;srcid=-1;key=K; ← cmd=kvs-get-response;rc=0;found=TRUE;value=V;
//	→ cmd=finalize;                       ← cmd=finalize-response;rc=0;
//
// The PMI-2 standard escapes a ';' inside a value as ";;"; SLURM 22.05 does
// not understand the escape, so the client refuses to send a ';' at all and
// accepts ";;" in what it reads.

// ErrPMI wraps every failure of the PMI-2 client: the descriptor is missing
// or is not a socket, the server broke the protocol or answered with an
// error, or it did not answer in time.
var ErrPMI = errors.New("launch: PMI-2")

// The limits of the protocol's fields, as MPICH and SLURM define them
// (PMI2_MAX_KEYLEN, PMI2_MAX_VALLEN), and of one message.
const (
	pmiMaxKeyLen   = 64
	pmiMaxValueLen = 1024
	pmiMaxMsgLen   = 64 << 10 // a bound on what we read; SLURM's answers are far shorter
	pmiLenField    = 6
	pmiMaxInitLine = 256
)

// PMIClient is a task's connection to the PMI-2 server of its job step.
// Its methods are safe for concurrent use (one request at a time); every
// wait is bounded.
type PMIClient struct {
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration

	mu     sync.Mutex    // one request at a time
	wait   time.Duration // the bound of the request under way (for errors)
	rank   int
	size   int
	jobID  string
	closed bool
}

// DefaultPMITimeout bounds each exchange with the PMI server that does not
// wait for other tasks (init, put, get, finalize).
const DefaultPMITimeout = 10 * time.Second

// PMIFromFD opens the PMI-2 connection whose descriptor SLURM passed in
// PMI_FD (the value of the variable: a decimal descriptor number). The
// descriptor must be a socket. timeout bounds each request that does not
// wait for the other tasks (0: DefaultPMITimeout).
func PMIFromFD(fdText string, timeout time.Duration) (*PMIClient, error) {
	fd, err := strconv.Atoi(strings.TrimSpace(fdText))
	if err != nil || fd < 0 {
		return nil, fmt.Errorf("%w: PMI_FD=%q is not a descriptor number", ErrPMI, fdText)
	}
	f := os.NewFile(uintptr(fd), "PMI_FD")
	if f == nil {
		return nil, fmt.Errorf("%w: PMI_FD=%d is not an open descriptor", ErrPMI, fd)
	}
	conn, err := net.FileConn(f) // dups the descriptor
	f.Close()
	if errors.Is(err, syscall.EBADF) {
		return nil, fmt.Errorf("%w: PMI_FD=%d is not an open descriptor (was the program started by srun itself, not by a child of it?)", ErrPMI, fd)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: PMI_FD=%d is not a socket: %v", ErrPMI, fd, err)
	}
	return NewPMIClient(conn, timeout), nil
}

// NewPMIClient speaks PMI-2 over conn (a socket to the PMI server; tests
// use one end of net.Pipe). timeout bounds each request that does not wait
// for other tasks (0: DefaultPMITimeout). Call [PMIClient.Init] first.
func NewPMIClient(conn net.Conn, timeout time.Duration) *PMIClient {
	if timeout <= 0 {
		timeout = DefaultPMITimeout
	}
	return &PMIClient{conn: conn, r: bufio.NewReaderSize(conn, 4096), timeout: timeout, rank: -1}
}

// Rank, Size and JobID are what the server said in Init (the task's global
// rank, the number of tasks of the step, and the PMI job id).
func (c *PMIClient) Rank() int      { return c.rank }
func (c *PMIClient) Size() int      { return c.size }
func (c *PMIClient) JobID() string  { return c.jobID }
func (c *PMIClient) String() string { return "PMI-2" }

// Init runs the version handshake and fullinit. rank is what the
// environment says (PMI_RANK) and pmiJobID the PMI_JOBID variable's value,
// as SLURM's own library sends them; the server's answer is checked
// against rank. It then asks for the job id (job-getid).
func (c *PMIClient) Init(ctx context.Context, rank int, pmiJobID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.bound(ctx, c.timeout)
	defer stop()
	if _, err := io.WriteString(c.conn, "cmd=init pmi_version=2 pmi_subversion=0\n"); err != nil {
		return c.ioErr(ctx, "sending init", err)
	}
	line, err := readInitLine(c.r)
	if err != nil {
		return c.ioErr(ctx, "reading the answer to init", err)
	}
	kv, err := parsePMI1(line)
	if err != nil {
		return fmt.Errorf("%w: bad answer to init %q: %v", ErrPMI, line, err)
	}
	if kv["cmd"] != "response_to_init" {
		return fmt.Errorf("%w: answer to init is %q, not response_to_init", ErrPMI, kv["cmd"])
	}
	if kv["rc"] != "0" {
		return fmt.Errorf("%w: the server refused PMI version 2.0 (rc=%s, it offers %s.%s)", ErrPMI, kv["rc"], kv["pmi_version"], kv["pmi_subversion"])
	}
	if kv["pmi_version"] != "2" {
		return fmt.Errorf("%w: the server answered init with PMI version %q, want 2", ErrPMI, kv["pmi_version"])
	}
	jobField := strings.TrimSpace(pmiJobID)
	if _, err := strconv.Atoi(jobField); err != nil {
		// SLURM reads pmijobid as a number and ignores it; PMI_JOBID is
		// "job.step". Send the job part.
		jobField, _, _ = strings.Cut(jobField, ".")
		if _, err := strconv.Atoi(jobField); err != nil {
			jobField = "0"
		}
	}
	resp, err := c.call(ctx, "fullinit-response", pair{"cmd", "fullinit"}, pair{"pmijobid", jobField},
		pair{"pmirank", strconv.Itoa(rank)}, pair{"threaded", "FALSE"})
	if err != nil {
		return err
	}
	r, err := intField(resp, "rank")
	if err != nil {
		return err
	}
	s, err := intField(resp, "size")
	if err != nil {
		return err
	}
	if s < 1 || s > MaxSize {
		return fmt.Errorf("%w: fullinit says size=%d, want 1 to %d", ErrPMI, s, MaxSize)
	}
	if r < 0 || r >= s {
		return fmt.Errorf("%w: fullinit says rank=%d of size=%d", ErrPMI, r, s)
	}
	if r != rank {
		return fmt.Errorf("%w: fullinit says rank=%d, PMI_RANK says %d", ErrPMI, r, rank)
	}
	c.rank, c.size = r, s
	resp, err = c.call(ctx, "job-getid-response", pair{"cmd", "job-getid"})
	if err != nil {
		return err
	}
	c.jobID = resp.get("jobid")
	if c.jobID == "" {
		return fmt.Errorf("%w: job-getid answered no jobid", ErrPMI)
	}
	return nil
}

// Put stores key=value in the job's key-value space; other tasks can Get
// it after the next Fence.
func (c *PMIClient) Put(ctx context.Context, key, value string) error {
	if err := checkPMIField("key", key, pmiMaxKeyLen); err != nil {
		return err
	}
	if err := checkPMIField("value", value, pmiMaxValueLen); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.bound(ctx, c.timeout)
	defer stop()
	_, err := c.call(ctx, "kvs-put-response", pair{"cmd", "kvs-put"}, pair{"key", key}, pair{"value", value})
	return err
}

// Fence waits until every task of the job has called Fence, after which
// every Put made before it is visible. It waits at most timeout (and
// until ctx ends): a task that died or never started leaves the others
// waiting, and the error says so.
func (c *PMIClient) Fence(ctx context.Context, timeout time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.bound(ctx, timeout)
	defer stop()
	_, err := c.call(ctx, "kvs-fence-response", pair{"cmd", "kvs-fence"})
	if err != nil && ctx.Err() == nil && errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: the fence did not complete within %v (%s): not all %d tasks reached it (one died, was not started, or is stuck before it): %w",
			ErrPMI, timeout, EnvSlurmTimeout, c.size, os.ErrDeadlineExceeded)
	}
	return err
}

// Get reads key from the job's key-value space; found is false if no task
// put it.
func (c *PMIClient) Get(ctx context.Context, key string) (value string, found bool, err error) {
	if err := checkPMIField("key", key, pmiMaxKeyLen); err != nil {
		return "", false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.bound(ctx, c.timeout)
	defer stop()
	resp, err := c.call(ctx, "kvs-get-response", pair{"cmd", "kvs-get"}, pair{"jobid", c.jobID},
		pair{"srcid", "-1"}, pair{"key", key})
	if err != nil {
		return "", false, err
	}
	switch f := resp.get("found"); strings.ToUpper(f) {
	case "TRUE":
		v, ok := resp.lookup("value")
		if !ok {
			return "", false, fmt.Errorf("%w: kvs-get of %q: found=TRUE but no value", ErrPMI, key)
		}
		return v, true, nil
	case "FALSE":
		return "", false, nil
	default:
		return "", false, fmt.Errorf("%w: kvs-get of %q: found=%q", ErrPMI, key, f)
	}
}

// Finalize tells the server this task is done with PMI and closes the
// connection.
func (c *PMIClient) Finalize(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	stop := c.bound(ctx, c.timeout)
	_, err := c.call(ctx, "finalize-response", pair{"cmd", "finalize"})
	stop()
	c.closed = true
	c.conn.Close()
	return err
}

// Close closes the connection without finalizing (the server takes it for
// the task's end). It is idempotent.
func (c *PMIClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	return c.conn.Close()
}

// bound sets the connection's deadline to timeout from now and makes ctx's
// end expire it at once; the returned function undoes both.
func (c *PMIClient) bound(ctx context.Context, timeout time.Duration) func() {
	c.wait = timeout
	c.conn.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() {
		stop()
		c.conn.SetDeadline(time.Time{})
	}
}

func (c *PMIClient) ioErr(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %s: %w", ErrPMI, what, ctx.Err())
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("%w: %s: the server did not answer within %v: %w", ErrPMI, what, c.wait, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		return fmt.Errorf("%w: %s: the server closed the connection", ErrPMI, what)
	}
	return fmt.Errorf("%w: %s: %w", ErrPMI, what, err)
}

// call sends one command and reads its answer, which must be the command
// want with rc=0.
func (c *PMIClient) call(ctx context.Context, want string, pairs ...pair) (pmiMsg, error) {
	if c.closed {
		return pmiMsg{}, fmt.Errorf("%w: the connection is closed", ErrPMI)
	}
	cmd := pairs[0].v
	if _, err := c.conn.Write(encodePMI2(pairs)); err != nil {
		return pmiMsg{}, c.ioErr(ctx, "sending "+cmd, err)
	}
	body, err := readPMI2(c.r)
	if err != nil {
		if errors.Is(err, errPMIFormat) {
			return pmiMsg{}, fmt.Errorf("%w: answer to %s: %w", ErrPMI, cmd, err)
		}
		return pmiMsg{}, c.ioErr(ctx, "waiting for the answer to "+cmd, err)
	}
	m, err := parsePMI2(body)
	if err != nil {
		return pmiMsg{}, fmt.Errorf("%w: answer to %s: %w", ErrPMI, cmd, err)
	}
	if got := m.get("cmd"); got != want {
		return pmiMsg{}, fmt.Errorf("%w: answer to %s is %q, want %q", ErrPMI, cmd, got, want)
	}
	if rc := m.get("rc"); rc != "0" {
		msg := m.get("errmsg")
		if msg == "" {
			msg = m.get("msg")
		}
		return pmiMsg{}, fmt.Errorf("%w: %s failed: rc=%q %s", ErrPMI, cmd, rc, msg)
	}
	return m, nil
}

type pair struct{ k, v string }

// pmiMsg is a parsed PMI-2 message: its pairs in order (keys may repeat).
type pmiMsg struct{ pairs []pair }

func (m pmiMsg) lookup(k string) (string, bool) {
	for _, p := range m.pairs {
		if p.k == k {
			return p.v, true
		}
	}
	return "", false
}

func (m pmiMsg) get(k string) string { v, _ := m.lookup(k); return v }

func intField(m pmiMsg, k string) (int, error) {
	v, ok := m.lookup(k)
	if !ok {
		return 0, fmt.Errorf("%w: %s has no %s", ErrPMI, m.get("cmd"), k)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s says %s=%q, not a number", ErrPMI, m.get("cmd"), k, v)
	}
	return n, nil
}

// errPMIFormat marks a message that breaks the wire format (as opposed to
// an I/O error).
var errPMIFormat = errors.New("malformed PMI-2 message")

// checkPMIField refuses what SLURM could not read back: a ';' (it does not
// undo the ";;" escape), a newline, an '=' in a key, an empty key, or a
// field longer than the protocol's limit.
func checkPMIField(what, s string, max int) error {
	switch {
	case what == "key" && s == "":
		return fmt.Errorf("%w: empty key", ErrPMI)
	case len(s) > max:
		return fmt.Errorf("%w: %s of %d bytes, the limit is %d", ErrPMI, what, len(s), max)
	case strings.ContainsAny(s, ";\n\x00"):
		return fmt.Errorf("%w: %s %q holds a ';', newline or NUL", ErrPMI, what, s)
	case what == "key" && strings.Contains(s, "="):
		return fmt.Errorf("%w: key %q holds an '='", ErrPMI, s)
	}
	return nil
}

// encodePMI2 frames pairs as one PMI-2 message: the 6-byte length, then
// "k=v;" for each pair. The fields were checked by the caller.
func encodePMI2(pairs []pair) []byte {
	var b strings.Builder
	for _, p := range pairs {
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
		b.WriteByte(';')
	}
	return []byte(fmt.Sprintf("%-6d", b.Len()) + b.String())
}

// readPMI2 reads one length-prefixed message body.
func readPMI2(r *bufio.Reader) (string, error) {
	var lenField [pmiLenField]byte
	if _, err := io.ReadFull(r, lenField[:]); err != nil {
		return "", err
	}
	n, err := parsePMILen(lenField[:])
	if err != nil {
		return "", err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return string(body), nil
}

// parsePMILen reads the 6-byte length field: decimal digits, then spaces
// (SLURM's "%-6d"); leading spaces are accepted too.
func parsePMILen(f []byte) (int, error) {
	s := strings.TrimSpace(string(f))
	if s == "" {
		return 0, fmt.Errorf("%w: empty length field %q", errPMIFormat, f)
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: length field %q is not a decimal number", errPMIFormat, f)
		}
		n = n*10 + int(s[i]-'0')
	}
	if n == 0 || n > pmiMaxMsgLen {
		return 0, fmt.Errorf("%w: length %d, want 1 to %d", errPMIFormat, n, pmiMaxMsgLen)
	}
	return n, nil
}

// parsePMI2 parses a message body: "k=v;" pairs, the first of which is
// cmd. A ";;" inside a value stands for one ';'.
func parsePMI2(body string) (pmiMsg, error) {
	var m pmiMsg
	i := 0
	for i < len(body) {
		eq := strings.IndexByte(body[i:], '=')
		if eq < 0 {
			return pmiMsg{}, fmt.Errorf("%w: %q has no '='", errPMIFormat, clip(body[i:]))
		}
		key := body[i : i+eq]
		if key == "" || strings.ContainsAny(key, ";\n") {
			return pmiMsg{}, fmt.Errorf("%w: bad key %q", errPMIFormat, clip(key))
		}
		i += eq + 1
		var v strings.Builder
		terminated := false
		for i < len(body) {
			ch := body[i]
			if ch == ';' {
				if i+1 < len(body) && body[i+1] == ';' {
					v.WriteByte(';')
					i += 2
					continue
				}
				i++
				terminated = true
				break
			}
			v.WriteByte(ch)
			i++
		}
		if !terminated {
			return pmiMsg{}, fmt.Errorf("%w: the value of %q is not terminated by ';'", errPMIFormat, clip(key))
		}
		m.pairs = append(m.pairs, pair{key, v.String()})
	}
	if len(m.pairs) == 0 || m.pairs[0].k != "cmd" {
		return pmiMsg{}, fmt.Errorf("%w: %q does not begin with cmd=", errPMIFormat, clip(body))
	}
	return m, nil
}

// readInitLine reads the answer to init: one line of at most
// pmiMaxInitLine bytes.
func readInitLine(r *bufio.Reader) (string, error) {
	var b []byte
	for len(b) <= pmiMaxInitLine {
		ch, err := r.ReadByte()
		if err != nil {
			return "", err
		}
		if ch == '\n' {
			return string(b), nil
		}
		b = append(b, ch)
	}
	return "", fmt.Errorf("%w: the answer to init is longer than %d bytes without a newline", errPMIFormat, pmiMaxInitLine)
}

// parsePMI1 parses a PMI-1 line: space-separated key=value words.
func parsePMI1(line string) (map[string]string, error) {
	kv := map[string]string{}
	for _, w := range strings.Fields(line) {
		k, v, ok := strings.Cut(w, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%w: word %q is not key=value", errPMIFormat, clip(w))
		}
		kv[k] = v
	}
	if _, ok := kv["cmd"]; !ok {
		return nil, fmt.Errorf("%w: no cmd", errPMIFormat)
	}
	return kv, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
