package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/group"
)

// logBuffer is a replica's log, written by its goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// waitServing waits until r serves a view of exactly names.
func waitServing(t *testing.T, r *replica, names ...string) group.View {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		n := r.node
		n.mu.Lock()
		v, ready, ch := n.view, n.ready, n.changed
		n.mu.Unlock()
		if ready && len(v.Members) == len(names) {
			ok := true
			for _, name := range names {
				_, has := memberNamed(v, name)
				ok = ok && has
			}
			if ok {
				return v
			}
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: no view of %v served within 30 s (now %v, ready %v)", n.name, names, v, ready)
		}
	}
}

// parallel runs f(i) for i in [0, n) on workers goroutines.
func parallel(n, workers int, f func(i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// TestKillOneReplica writes 10,000 keys through three replicas, kills
// one, reads every key back through the survivors, then through the
// killed one restarted empty, and checks from the replicas' logs that no two replicas served a key in the same epoch, and
// that each served key was its owner's in that epoch's view.
func TestKillOneReplica(t *testing.T) {
	const keys = 10000
	ctx := context.Background()
	names := []string{"a", "b", "c"}
	logs := map[string]*logBuffer{}
	rs := map[string]*replica{}
	var seeds []string
	for _, name := range names {
		logs[name] = &logBuffer{}
		r, err := start(ctx, options{name: name, httpAddr: "127.0.0.1:0", bind: "127.0.0.1:0", seeds: seeds,
			secret: []byte("kv-test-secret-0123456789")}, logs[name])
		if err != nil {
			t.Fatal(err)
		}
		defer r.kill()
		rs[name] = r
		seeds = append(seeds, r.node.g.Addr())
	}
	for _, name := range names {
		waitServing(t, rs[name], names...)
	}

	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	do := func(method, url, body string) (int, string, error) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	var mu sync.Mutex
	var errs []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(errs) < 10 {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	parallel(keys, 16, func(i int) {
		r := rs[names[i%3]]
		if code, msg, err := do("PUT", fmt.Sprintf("%s/kv/k%d", r.url, i), fmt.Sprint("v", i)); err != nil || code != http.StatusNoContent {
			fail("PUT k%d through %s: %d %s %v", i, r.node.name, code, msg, err)
		}
	})
	if errs != nil {
		t.Fatalf("writes failed:\n%s", strings.Join(errs, "\n"))
	}

	rs["b"].kill()
	survivors := []string{"a", "c"}
	for _, name := range survivors {
		waitServing(t, rs[name], survivors...)
	}
	parallel(keys, 16, func(i int) {
		r := rs[survivors[i%2]]
		code, got, err := do("GET", fmt.Sprintf("%s/kv/k%d", r.url, i), "")
		if err != nil || code != http.StatusOK || got != fmt.Sprint("v", i) {
			fail("GET k%d through %s: %d %q %v, want v%d", i, r.node.name, code, got, err, i)
		}
	})
	if errs != nil {
		t.Fatalf("reads after the kill failed:\n%s", strings.Join(errs, "\n"))
	}

	// b restarts (empty): it serves its keys only once the others handed
	// them over.
	r, err := start(ctx, options{name: "b", httpAddr: "127.0.0.1:0", bind: "127.0.0.1:0", seeds: seeds,
		secret: []byte("kv-test-secret-0123456789")}, logs["b"])
	if err != nil {
		t.Fatal(err)
	}
	defer r.kill()
	rs["b"] = r
	parallel(keys, 16, func(i int) {
		code, got, err := do("GET", fmt.Sprintf("%s/kv/k%d", r.url, i), "")
		if err != nil || code != http.StatusOK || got != fmt.Sprint("v", i) {
			fail("GET k%d through the restarted b: %d %q %v, want v%d", i, code, got, err, i)
		}
	})
	if errs != nil {
		t.Fatalf("reads after the restart failed:\n%s", strings.Join(errs, "\n"))
	}

	// From the logs: the views each replica installed, and who served
	// which key in which epoch.
	views := map[uint64]group.View{}
	servedBy := map[string]string{} // "epoch/key" → replica
	served := 0
	for _, name := range names {
		sc := bufio.NewScanner(strings.NewReader(logs[name].String()))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 3 || f[0] != name {
				continue
			}
			epoch, _ := strconv.ParseUint(strings.TrimPrefix(f[2], "epoch="), 10, 64)
			switch f[1] {
			case "view":
				var v group.View
				for _, m := range strings.Split(strings.TrimPrefix(f[3], "members="), ",") {
					v.Members = append(v.Members, group.Member{Name: m})
				}
				if old, ok := views[epoch]; ok && old.String() != v.String() {
					t.Errorf("epoch %d: %s installed %v, another %v", epoch, name, v, old)
				}
				views[epoch] = v
			case "serve":
				key := strings.TrimPrefix(f[3], "key=")
				id := fmt.Sprint(epoch, "/", key)
				if other, ok := servedBy[id]; ok && other != name {
					t.Errorf("epoch %d: key %s served by %s and %s", epoch, key, other, name)
				}
				servedBy[id] = name
				served++
			}
		}
	}
	for id, name := range servedBy {
		epochText, key, _ := strings.Cut(id, "/")
		epoch, _ := strconv.ParseUint(epochText, 10, 64)
		v, ok := views[epoch]
		if !ok {
			t.Errorf("%s served %s in epoch %d, which it did not log installing", name, key, epoch)
		} else if o := v.Owner(key); o.Name != name {
			t.Errorf("%s served %s in epoch %d, whose owner is %s", name, key, epoch, o.Name)
		}
	}
	if served < 3*keys {
		t.Errorf("the logs show %d requests served, want at least %d", served, 3*keys)
	}
	t.Logf("%d requests served in %d epochs, one replica per key and epoch", served, len(views))
}
