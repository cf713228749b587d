package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/webhook"
)

// chaosReceiver is a webhook receiver that checks every delivery's
// signature and keeps the events it got; while down it answers 503.
type chaosReceiver struct {
	secret []byte
	down   atomic.Bool

	mu      sync.Mutex
	got     map[string]bool // "job type time"
	invalid int
}

func (r *chaosReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if r.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var p webhook.Payload
	if !webhook.Verify(r.secret, body, req.Header.Get(webhook.SignatureHeader)) || json.Unmarshal(body, &p) != nil {
		r.invalid++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.got[chaosKey(string(p.Job), p.Type, p.Time)] = true
	w.WriteHeader(http.StatusNoContent)
}

func chaosKey(job, typ string, t time.Time) string {
	return job + " " + typ + " " + t.UTC().Format(time.RFC3339Nano)
}

// TestEndToEndChaos runs the control plane and two agents as real
// processes with 200 jobs of real workload processes, and kills the
// control plane twice and each agent once (kill -9) at random moments,
// the webhook receiver away for a while besides. Afterwards every job
// that exited 0 is succeeded, none is lost, none was started twice beyond
// its attempts, and every event of every job's history reached the
// receiver at least once with a valid signature.
func TestEndToEndChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: serve, two agents and 200 jobs, killed on the way, for a minute or two")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("PRESCIENT_CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("chaos seed %d (PRESCIENT_CHAOS_SEED repeats it)", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	bin := e2eBin(t)
	c := newE2ECluster(t, bin)

	recv := &chaosReceiver{secret: []byte("chaos-webhook-secret-0123456789"), got: map[string]bool{}}
	hooks := httptest.NewServer(recv)
	defer hooks.Close()
	hooksFile := filepath.Join(c.dir, "webhooks.yaml")
	if err := os.WriteFile(hooksFile, []byte(fmt.Sprintf("webhooks:\n  - name: chaos\n    url: %s\n    secret: %q\n",
		hooks.URL, recv.secret)), 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func() { c.startServe("--webhooks", hooksFile, "--log-level", "warn") }

	// 1. The plane, two agents, 200 one-GPU jobs of 0.4 to 2 s each.
	serve()
	nodes := []string{"node-001", "node-002"}
	for _, n := range nodes {
		c.startAgent(n)
	}
	c.waitFor("both agents to register", 30*time.Second, func() (bool, string) {
		var f service.FleetState
		c.do(http.MethodGet, "/v1/fleet", e2eAdminToken, nil, &f)
		return f.GPUs == 8, fmt.Sprintf("%d GPUs", f.GPUs)
	})
	const jobs = 200
	ids := make([]string, jobs)
	for i := range ids {
		ids[i] = fmt.Sprintf("chaos-%03d", i)
		steps := 4 + rng.IntN(17)
		req := api.SubmitRequest{ID: ids[i], JobSpecRequest: api.JobSpecRequest{Name: ids[i], GPUs: 1, Checkpointable: true},
			Command: []string{bin, "workload", "--steps", strconv.Itoa(steps), "--step-time", "100ms", "--checkpoint-every", "5"}}
		if code := c.do(http.MethodPost, "/v1/jobs", e2eSubmitToken, req, nil); code != http.StatusCreated {
			t.Fatalf("POST /v1/jobs %s: %d", ids[i], code)
		}
	}

	// 2. The kills, at random moments while the jobs run; each comes back
	// at once. The receiver is away for 4 s around the first kill.
	began := time.Now()
	kills := []string{"serve", "serve", nodes[0], nodes[1]}
	rng.Shuffle(len(kills), func(i, k int) { kills[i], kills[k] = kills[k], kills[i] })
	for i, what := range kills {
		time.Sleep(time.Duration(2000+rng.IntN(4000)) * time.Millisecond)
		if i == 0 {
			recv.down.Store(true)
			time.AfterFunc(4*time.Second, func() { recv.down.Store(false) })
		}
		t.Logf("%5.1fs: kill -9 %s", time.Since(began).Seconds(), what)
		if what == "serve" {
			c.killServe()
			serve()
		} else {
			c.killAgent(what)
			c.startAgent(what)
		}
	}

	// 3. Every job ends, and the way it should.
	final := map[string]service.JobStatus{}
	c.waitFor("every job to end", 4*time.Minute, func() (bool, string) {
		var list api.JobList
		c.do(http.MethodGet, "/v1/jobs?limit=1000", e2eAdminToken, nil, &list)
		done := 0
		for _, js := range list.Jobs {
			if js.State.Terminal() {
				done++
				final[string(js.ID)] = js
			}
		}
		return done == jobs, fmt.Sprintf("%d of %d ended", done, jobs)
	})
	t.Logf("%5.1fs: all %d jobs ended", time.Since(began).Seconds(), jobs)

	// Attempts as the agents' work dirs hold them: each ran once, on one
	// node, and only attempts the plane counted.
	ran := map[string][]e2eAttempt{}
	for _, a := range c.attempts() {
		ran[a.job] = append(ran[a.job], a)
	}
	succeeded := 0
	for _, id := range ids {
		js := final[id]
		seen := map[int]string{}
		exited0 := false
		for _, a := range ran[id] {
			if prev, ok := seen[a.attempt]; ok {
				t.Errorf("%s attempt %d ran on %s and on %s", id, a.attempt, prev, a.node)
			}
			seen[a.attempt] = a.node
			// None twice; none at all is an attempt its agent was killed
			// starting, reported ended for the plane to start another.
			if n := strings.Count(a.log, "workload start"); n > 1 {
				t.Errorf("%s attempt %d on %s started %d times", id, a.attempt, a.node, n)
			}
			if a.attempt > js.Attempts {
				t.Errorf("%s attempt %d ran, beyond the %d attempts the plane counts", id, a.attempt, js.Attempts)
			}
			exited0 = exited0 || strings.Contains(a.log, "done: ")
		}
		switch {
		case exited0 && js.State != cluster.StateSucceeded:
			var st service.JobStatus
			c.do(http.MethodGet, "/v1/jobs/"+id, e2eAdminToken, nil, &st)
			t.Errorf("%s exited 0 but is %s: %s", id, js.State, st.LastError)
		case js.State == cluster.StateSucceeded:
			succeeded++
		}
	}
	t.Logf("%d of %d jobs succeeded", succeeded, jobs)

	// 4. Every event of every job's history reached the receiver, signed.
	c.waitFor("every job event to reach the webhook receiver", 2*time.Minute, func() (bool, string) {
		var missing []string
		for _, id := range ids {
			var hist api.JobEventList
			c.do(http.MethodGet, "/v1/jobs/"+id+"/events", e2eAdminToken, nil, &hist)
			recv.mu.Lock()
			for _, e := range hist.Events {
				if k := chaosKey(id, e.Type, e.Time); !recv.got[k] {
					missing = append(missing, k)
				}
			}
			recv.mu.Unlock()
		}
		return len(missing) == 0, fmt.Sprintf("%d events missing, e.g. %v", len(missing), missing[:min(len(missing), 5)])
	})
	if recv.invalid > 0 {
		t.Errorf("%d deliveries with an invalid signature", recv.invalid)
	}
}
