package runner_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cohort-mp/cohort/internal/runner"
	"github.com/cohort-mp/cohort/internal/runner/runnertest"
)

// TestPortTakenStartsAgain gives the first launch of a job a port that
// another program holds: the job starts on new ports, says so in one
// line, and shows none of the abandoned attempt's exits as the job's.
func TestPortTakenStartsAgain(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	calls := 0
	defer runner.SetPickAddrs(func(n int) ([]string, error) {
		addrs, err := runner.FreeAddrs(n)
		if calls++; calls == 1 && err == nil {
			addrs[n-1] = taken.Addr().String()
		}
		return addrs, err
	})()

	var mu sync.Mutex
	var lines []string
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	job := runnertest.StartJob(t, ctx, runner.JobConfig{N: 3, Fanout: 4, OnLine: func(l string) {
		mu.Lock()
		lines = append(lines, l)
		mu.Unlock()
	}})
	if _, err := job.WaitAgreed(ctx, nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(lines, "\n")
	if calls != 2 {
		t.Errorf("addresses picked %d times, want 2 (a launch again after the taken port)", calls)
	}
	if !strings.Contains(all, "port was taken") || !strings.Contains(all, "starting every process again on new ports") {
		t.Errorf("no line says the job starts again:\n%s", all)
	}
	if strings.Contains(all, "exited on its own") {
		t.Errorf("the abandoned attempt's exits are shown as the job's:\n%s", all)
	}
}
