package webhook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/webhook"
)

// The helper control plane is this test binary run again with these
// variables set.
const (
	helperDBEnv  = "PRESCIENT_WEBHOOK_HELPER_DB"
	helperURLEnv = "PRESCIENT_WEBHOOK_HELPER_URL"
	crashJobs    = 100
)

// TestHelperPlane is not a test: it is the process that
// TestEventsOutliveAKilledPlane kills. Like the control plane, it records
// each job in the store and then tells the notifier, and prints
// "submitted ID" once both returned: a line on stdout is a job accepted.
func TestHelperPlane(t *testing.T) {
	path := os.Getenv(helperDBEnv)
	if path == "" {
		t.Skip("the process TestEventsOutliveAKilledPlane kills")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n, err := webhook.New(webhook.Config{Hooks: []webhook.Hook{hook("tracker", os.Getenv(helperURLEnv))}},
		webhook.Options{Outbox: st, Recorder: st, BaseDelay: 50 * time.Millisecond, MaxDelay: 100 * time.Millisecond, Logger: quiet()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	t0 := time.Now()
	for i := range crashJobs {
		j := clustertest.Job(fmt.Sprintf("job-%03d", i)).Tenant("ml").Label("experiment", "e1").Submitted(t0).Obj()
		if err := st.SubmitJob(ctx, j); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		n.Notify(ctx, service.LifecycleEvent{Type: string(store.EventSubmitted), Time: t0, Job: j.ID, Tenant: "ml", State: j.State})
		fmt.Println("submitted", j.ID)
	}
	time.Sleep(time.Minute) // the parent kills us long before this
	os.Exit(3)
}

// switchable is a receiver that answers 500 until it is switched up.
type switchable struct {
	mu   sync.Mutex
	up   bool
	seen map[cluster.JobID]int // signed deliveries taken, by job
	hits int
}

func (r *switchable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits++
	if !r.up {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var p webhook.Payload
	if json.Unmarshal(body, &p) == nil && webhook.Verify([]byte(secret), body, req.Header.Get(webhook.SignatureHeader)) &&
		p.Type == string(store.EventSubmitted) && p.Labels["experiment"] == "e1" {
		r.seen[p.Job]++
	}
	w.WriteHeader(http.StatusOK)
}

// A control plane killed with SIGKILL while its receiver is down loses no
// event it accepted: the next run, on the same store, delivers every one,
// signed. Before the outbox row was written in the event's transaction,
// the events queued behind the retrying delivery died with the process.
func TestEventsOutliveAKilledPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	path := filepath.Join(t.TempDir(), "prescient.db")
	recv := &switchable{seen: map[cluster.JobID]int{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPlane$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDBEnv+"="+path, helperURLEnv+"="+srv.URL)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for sc := bufio.NewScanner(out); accepted < crashJobs && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "submitted ") {
			accepted++
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if accepted != crashJobs {
		t.Fatalf("the helper accepted %d jobs before it ended, want %d", accepted, crashJobs)
	}

	recv.mu.Lock()
	recv.up = true
	recv.mu.Unlock()
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := webhook.New(webhook.Config{Hooks: []webhook.Hook{hook("tracker", srv.URL)}},
		webhook.Options{Outbox: st, Recorder: st, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, n)
	recv.mu.Lock()
	defer recv.mu.Unlock()
	for i := range crashJobs {
		if id := cluster.JobID(fmt.Sprintf("job-%03d", i)); recv.seen[id] == 0 {
			t.Errorf("%s: its submitted event never arrived signed (%d of %d did)", id, len(recv.seen), crashJobs)
			break
		}
	}
	if left, err := st.WebhookDeliveries(context.Background()); err != nil || len(left) != 0 {
		t.Errorf("outbox after the restart: %d deliveries (%v), want none", len(left), err)
	}
}
