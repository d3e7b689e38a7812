package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cohort-mp/cohort/p2p/ca"
	"github.com/cohort-mp/cohort/p2p/stage"
)

// The daemon's HTTP/JSON API, served over mutual TLS (package p2p/ca). The
// caller is the name of its client certificate.
//
//	GET  /v1/ping                           → Info (the submitter times it: the latency ranking)
//	GET  /v1/peers                          → {"peers": [PeerInfo]} (the cached list, with latencies)
//	GET  /v1/ps                             → {"jobs": [JobInfo]}
//	POST /v1/reserve  ReserveRequest        → ReserveReply
//	POST /v1/release  {"token"}             → {}
//	PUT  /v1/jobs/TOKEN/files?path=&size=&sha256=&exec=   body: the file
//	POST /v1/jobs/TOKEN/launch LaunchRequest → a stream of Event lines (JSON), until the job ends
//	POST /v1/jobs/TOKEN/spawn  LaunchRank    → {} (one more process of the running job, on its stream: spawn.go)
//	POST /v1/jobs/TOKEN/stop   StopRequest   → {} (one process of the running job stopped, SIGTERM then SIGKILL: stopproc.go)
//	POST /v1/halt                           → {} (the daemon's own name or an admin only)
//
// Every refusal is an HTTP error status with a one-line reason in the body
// (and the same reason in the daemon's log).

// Info answers a ping: the daemon's name and what it offers.
type Info struct {
	Name string `json:"name"`
	// ProcsPerJob is P, how many processes of one job it runs; FreeJobs
	// how many more jobs it accepts now (of J).
	ProcsPerJob int `json:"procs_per_job"`
	FreeJobs    int `json:"free_jobs"`
}

// PeerInfo is a peer of the cached list.
type PeerInfo struct {
	Name string `json:"name"`
	Addr string `json:"addr"`
	// RTTMicros is the last measured application-level round trip, in
	// microseconds; 0 if never measured, -1 if the last ping failed.
	RTTMicros int64 `json:"rtt_us"`
	// DialOutOnly: nobody can dial the peer (it is reached through a
	// supernode); daemons do not ping it.
	DialOutOnly bool `json:"dial_out_only,omitempty"`
}

// ReserveRequest asks for Procs slots of Job.
type ReserveRequest struct {
	Job   string `json:"job"`
	Procs int    `json:"procs"`
}

// ReserveReply is a granted reservation.
type ReserveReply struct {
	Token string `json:"token"`
	Procs int    `json:"procs"`
}

// LaunchRank is one process to start.
type LaunchRank struct {
	Rank int `json:"rank"`
	// Env holds this rank's variables ("NAME=value"), besides the job's.
	Env []string `json:"env"`
}

// LaunchRequest starts a job's processes on the daemon: Program (a path
// staged in the job's directory) with Args, the environment Env (the job's
// bootstrap variables, secret included: it travels only inside TLS and
// reaches the ranks through their environment) and, per rank, its own.
type LaunchRequest struct {
	Program string       `json:"program"`
	Args    []string     `json:"args"`
	Env     []string     `json:"env"`
	Ranks   []LaunchRank `json:"ranks"`
}

// Event is a line of a launch's stream.
type Event struct {
	// Rank is the process the event is of (output, exit).
	Rank int `json:"rank"`
	// Out is a line of the rank's output; Stderr says which stream.
	Out    string `json:"out,omitempty"`
	Stderr bool   `json:"stderr,omitempty"`
	// Exited: the rank ended with Code (or Signal, when killed: the
	// signal's name, SIGKILL).
	Exited bool   `json:"exited,omitempty"`
	Code   int    `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
	// Alive is the daemon's keep-alive (sent every second): a stream
	// silent for longer than a few seconds means its host is lost.
	Alive bool `json:"alive,omitempty"`
	// Error reports a failure of the daemon's (a rank it could not start;
	// the daemon shutting down).
	Error string `json:"error,omitempty"`
	// Done ends the stream: every rank has ended.
	Done bool `json:"done,omitempty"`
}

// JobInfo is a job on the daemon (cohort ps).
type JobInfo struct {
	Job       string     `json:"job"`
	Submitter string     `json:"submitter"`
	Procs     int        `json:"procs"`
	Confirmed bool       `json:"confirmed"`
	Ranks     []ProcInfo `json:"ranks,omitempty"`
}

// ProcInfo is a process of a job.
type ProcInfo struct {
	Rank    int    `json:"rank"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Exit    string `json:"exit,omitempty"`
}

// ErrRefused wraps every refusal a daemon answered (its reason follows).
var ErrRefused = errors.New("daemon refused")

// Client speaks to one daemon.
type Client struct {
	// Name is the daemon's certificate name (checked in the handshake);
	// Addr its host:port.
	Name, Addr string
	hc         *http.Client
}

// NewClient returns a client of the daemon name at addr, authenticated
// with creds.
func NewClient(creds *ca.Credentials, name, addr string) *Client {
	tr := &http.Transport{
		TLSClientConfig:     creds.ClientConfig(name),
		TLSHandshakeTimeout: 5 * time.Second,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 4,
	}
	return &Client{Name: name, Addr: addr, hc: &http.Client{Transport: tr}}
}

// Close releases the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

func (c *Client) url(path string) string { return "https://" + c.Addr + path }

// do sends a request and decodes a JSON answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), body)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("daemon %s (%s): %w", c.Name, c.Addr, err)
	}
	defer resp.Body.Close()
	if err := checkStatus(c.Name, resp); err != nil {
		return err
	}
	if out == nil {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(out); err != nil {
		return fmt.Errorf("daemon %s: malformed answer: %w", c.Name, err)
	}
	return nil
}

// checkStatus turns an error status into an error wrapping ErrRefused
// with the daemon's reason.
func checkStatus(name string, resp *http.Response) error {
	if resp.StatusCode/100 == 2 {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return fmt.Errorf("%w: %s: %s (%s)", ErrRefused, name, strings.TrimSpace(string(msg)), resp.Status)
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// Ping asks the daemon what it offers and returns the round trip.
func (c *Client) Ping(ctx context.Context) (Info, time.Duration, error) {
	var info Info
	start := time.Now()
	err := c.do(ctx, "GET", "/v1/ping", nil, &info)
	return info, time.Since(start), err
}

// Peers returns the daemon's cached peer list.
func (c *Client) Peers(ctx context.Context) ([]PeerInfo, error) {
	var out struct {
		Peers []PeerInfo `json:"peers"`
	}
	err := c.do(ctx, "GET", "/v1/peers", nil, &out)
	return out.Peers, err
}

// PS returns the daemon's jobs.
func (c *Client) PS(ctx context.Context) ([]JobInfo, error) {
	var out struct {
		Jobs []JobInfo `json:"jobs"`
	}
	err := c.do(ctx, "GET", "/v1/ps", nil, &out)
	return out.Jobs, err
}

// Reserve asks for procs slots of job.
func (c *Client) Reserve(ctx context.Context, job string, procs int) (ReserveReply, error) {
	var out ReserveReply
	err := c.do(ctx, "POST", "/v1/reserve", jsonBody(ReserveRequest{Job: job, Procs: procs}), &out)
	return out, err
}

// Release gives a token back.
func (c *Client) Release(ctx context.Context, token string) error {
	return c.do(ctx, "POST", "/v1/release", jsonBody(map[string]string{"token": token}), nil)
}

// Halt asks the daemon to shut down (its running jobs are told and
// stopped).
func (c *Client) Halt(ctx context.Context) error {
	return c.do(ctx, "POST", "/v1/halt", nil, nil)
}

// Stage sends a file of the job holding token; r gives f.Size bytes.
func (c *Client) Stage(ctx context.Context, token string, f stage.File, r io.Reader) error {
	q := url.Values{}
	q.Set("path", f.Path)
	q.Set("size", strconv.FormatInt(f.Size, 10))
	q.Set("sha256", f.SHA256)
	if f.Exec {
		q.Set("exec", "1")
	}
	req, err := http.NewRequestWithContext(ctx, "PUT", c.url("/v1/jobs/"+url.PathEscape(token)+"/files?"+q.Encode()), r)
	if err != nil {
		return err
	}
	req.ContentLength = f.Size
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("daemon %s (%s): staging %s: %w", c.Name, c.Addr, f.Path, err)
	}
	defer resp.Body.Close()
	return checkStatus(c.Name, resp)
}

// Launch starts the job's processes and calls each for every event of its
// stream until the stream ends (Done, nil), fails, or stays silent for
// silence (the host is then taken as lost: an error wrapping
// ErrSilent). Cancelling ctx closes the stream, and the daemon then kills
// the job's processes.
func (c *Client) Launch(ctx context.Context, token string, lr LaunchRequest, silence time.Duration, each func(Event)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", c.url("/v1/jobs/"+url.PathEscape(token)+"/launch"), jsonBody(lr))
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("daemon %s (%s): launch: %w", c.Name, c.Addr, err)
	}
	defer resp.Body.Close()
	if err := checkStatus(c.Name, resp); err != nil {
		return err
	}
	// A watchdog cancels the stream when nothing arrived for silence.
	heard := make(chan struct{}, 1)
	silent := make(chan struct{})
	go func() {
		t := time.NewTimer(silence)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-heard:
				t.Reset(silence)
			case <-t.C:
				close(silent)
				cancel()
				return
			}
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), maxLine+4096)
	for sc.Scan() {
		select {
		case heard <- struct{}{}:
		default:
		}
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("daemon %s: malformed event: %w", c.Name, err)
		}
		if ev.Done {
			return nil
		}
		each(ev)
	}
	select {
	case <-silent:
		return fmt.Errorf("%w: daemon %s (%s) sent nothing for %v", ErrSilent, c.Name, c.Addr, silence)
	default:
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("daemon %s (%s): the stream broke: %w", c.Name, c.Addr, err)
	}
	return fmt.Errorf("daemon %s (%s): the stream ended before the job", c.Name, c.Addr)
}

// Spawn asks the daemon to start one more process of the running job
// holding token: rk with the launch's program, arguments and environment,
// its output and exit reported on the job's launch stream. A refusal
// (see spawn.go) wraps ErrRefused and names why.
func (c *Client) Spawn(ctx context.Context, token string, rk LaunchRank) error {
	return c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(token)+"/spawn", jsonBody(rk), nil)
}

// Stop asks the daemon to stop process rank of the running job holding
// token (SIGTERM, then SIGKILL after the grace period); its exit comes
// on the job's launch stream. A process that has ended already is no
// error. A refusal (see stopproc.go) wraps ErrRefused and names why.
func (c *Client) Stop(ctx context.Context, token string, rank int) error {
	return c.do(ctx, "POST", "/v1/jobs/"+url.PathEscape(token)+"/stop", jsonBody(StopRequest{Rank: rank}), nil)
}

// ErrSilent: a daemon's launch stream stayed silent: its host is lost (cut
// off, or dead).
var ErrSilent = errors.New("host lost")
