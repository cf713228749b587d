package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/backend/agenthub"
	"github.com/prescient-sched/prescient/executor"
)

// The control plane reads the end of a job's log through the channel the
// agent keeps with it, whether the job runs or ended.
func TestTheHubReadsTheTailOfAnAttemptsLog(t *testing.T) {
	p := newPlane(t, agenthub.HubOptions{})
	dir := t.TempDir()
	runAgent(t, p.url(), "n1", dir)
	p.next(executor.NodeSynced, "")
	if err := p.hub.Start(context.Background(), assignment("j1", 1, gpusOf("n1", 0), "--steps=5", "--step-time=10ms")); err != nil {
		t.Fatal(err)
	}
	p.next(executor.JobExited, "j1")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The hub learns that the agent answers log commands at its next poll.
	waitFor(t, "a poll that says it sends logs", func() bool {
		c, stop := context.WithTimeout(ctx, 3*time.Second)
		defer stop()
		return p.hub.JobLog(c, "j1", 1, []string{"n1"}, 1<<16)[0].Unavailable == ""
	})
	got := p.hub.JobLog(ctx, "j1", 1, []string{"n1", "n9"}, 1<<16)
	if len(got) != 2 || got[0].Node != "n1" || !strings.Contains(got[0].Text, "done: 5 steps") || got[0].Truncated {
		t.Fatalf("log of n1: %+v", got[0])
	}
	if got[1].Node != "n9" || got[1].Text != "" || !strings.Contains(got[1].Unavailable, "n9") {
		t.Errorf("log of a node with no agent: %+v, want unavailable, naming it", got[1])
	}
	full := jobLog(t, dir, "j1", 1)

	// A small tail starts at a line and says it is one.
	small := p.hub.JobLog(ctx, "j1", 1, []string{"n1"}, 40)[0]
	if !small.Truncated || len(small.Text) > 40 || !strings.HasSuffix(full, small.Text) || !strings.HasPrefix(full[len(full)-len(small.Text)-1:], "\n") {
		t.Errorf("tail of 40 bytes: %+v\nof\n%s", small, full)
	}
	// An attempt that did not run on the node.
	if none := p.hub.JobLog(ctx, "j1", 7, []string{"n1"}, 100)[0]; none.Text != "" || !strings.Contains(none.Unavailable, "attempt 7") {
		t.Errorf("log of an attempt never run: %+v", none)
	}
}

func TestTailStartsAtALine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.log")
	os.WriteFile(path, []byte("one\ntwo\nthree\n"), 0o644)
	for _, c := range []struct {
		max       int
		text      string
		truncated bool
	}{{100, "one\ntwo\nthree\n", false}, {14, "one\ntwo\nthree\n", false}, {9, "three\n", true}, {4, "ree\n", true}} {
		text, truncated, err := tail(path, c.max)
		if err != nil || text != c.text || truncated != c.truncated {
			t.Errorf("tail(%d) = %q %v %v; want %q %v", c.max, text, truncated, err, c.text, c.truncated)
		}
	}
	if _, _, err := tail(filepath.Join(t.TempDir(), "none"), 10); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}
