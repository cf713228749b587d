package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/internal/browsertest"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// TestEndToEnd runs issue #8's end-to-end scenario with real processes: a
// built prescient binary as `serve` (autopilot, agent backend, prescient
// policy) and two `agent`s on simulated 4-GPU nodes, whose jobs are real
// `prescient workload` processes. It submits jobs over HTTP, checks that
// each process runs on the GPUs the API reports, fills the fleet with
// low-tier jobs and has a production job preempt some (they checkpoint, stop
// and later resume from their checkpoint), kills the control plane with
// SIGKILL and starts it again on the same database, runs the dashboard
// scenario in headless Chromium, and checks at the end that every accepted
// job succeeded and no (job, attempt) ever started twice: in the agents'
// work directories, logs and state files, and in the store.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds the binary and runs serve, agents and jobs for about a minute")
	}
	began := time.Now()
	bin := e2eBin(t)
	c := newE2ECluster(t, bin)
	workload := func(steps int) []string {
		return []string{bin, "workload", "--steps", strconv.Itoa(steps), "--step-time", "200ms", "--checkpoint-every", "10"}
	}
	submit := func(id, tier string, gpus, steps int) {
		t.Helper()
		req := api.SubmitRequest{ID: id, JobSpecRequest: api.JobSpecRequest{Name: id, Tier: tier, GPUs: gpus, Checkpointable: true},
			Command: workload(steps)}
		var js service.JobStatus
		if code := c.do(http.MethodPost, "/v1/jobs", e2eSubmitToken, req, &js); code != http.StatusCreated {
			t.Fatalf("POST /v1/jobs %s: %d, want 201", id, code)
		}
		if string(js.ID) != id || js.Tenant != "ml" {
			t.Fatalf("POST /v1/jobs %s answered job %s of tenant %q", id, js.ID, js.Tenant)
		}
	}
	obs := newE2EObserver(c)
	stopPolling := obs.poll()
	defer stopPolling()

	// 1. The control plane and two agents, which register their GPUs.
	c.startServe()
	nodes := []string{"node-001", "node-002"}
	for _, n := range nodes {
		c.startAgent(n)
	}
	c.waitFor("both agents to register 4 GPUs each", 30*time.Second, func() (bool, string) {
		var f service.FleetState
		c.do(http.MethodGet, "/v1/fleet", e2eAdminToken, nil, &f)
		ok := 0
		for _, n := range f.Nodes {
			if n.Agent && len(n.GPUs) == 4 {
				ok++
			}
		}
		return ok == 2 && f.GPUs == 8, fmt.Sprintf("%+v", f.Nodes)
	})

	// 2. Low-tier jobs fill all 8 GPUs; each runs on the GPUs the API says.
	fills := []string{"fill-batch", "fill-opp-a", "fill-opp-b"}
	const fillSteps = 60
	submit("fill-batch", "batch", 4, fillSteps)
	submit("fill-opp-a", "opportunistic", 2, fillSteps)
	submit("fill-opp-b", "opportunistic", 2, fillSteps)
	c.waitFor("the three fill jobs to run on their GPUs", 30*time.Second, func() (bool, string) {
		return obs.allStarted(fills...)
	})

	// 3. A production job that needs 4 whole GPUs preempts the
	// opportunistic jobs: they checkpoint, stop and go back to the queue.
	const prodSteps = 25
	submit("prod", "production", 4, prodSteps)
	c.waitFor("the production job to run on its GPUs", 30*time.Second, func() (bool, string) {
		return obs.allStarted("prod")
	})
	prodGPUs := obs.placementOf("prod", 1)
	var victims []string
	for _, id := range fills {
		if obs.overlaps(id, 1, prodGPUs) {
			victims = append(victims, id)
		}
	}
	if len(victims) == 0 {
		t.Fatalf("production job runs on %v, which no fill job held: %v", prodGPUs, obs.placements)
	}
	for _, id := range victims {
		if js := c.job(id); js.Tier != "opportunistic" {
			t.Errorf("victim %s is of tier %s; the prescient policy preempts the lowest tier (opportunistic) first", id, js.Tier)
		}
	}
	t.Logf("production job on %v preempted %v", prodGPUs, victims)

	// 4. A job accepted just before the control plane is killed (kill -9)
	// while the production job runs; its agents keep running its process.
	submit("late", "standard", 2, 10)
	accepted := append(slices.Clone(fills), "prod", "late")
	prodNode, _, _ := strings.Cut(prodGPUs[0], "/")
	prodDone := fmt.Sprintf("done: %d steps", prodSteps)
	if strings.Contains(c.attemptLog(prodNode, "prod", 1), prodDone) {
		t.Logf("the production job finished before the control plane was killed (a slow machine): its exit was reported before the kill")
	}
	c.killServe()
	c.waitFor("the production job to finish while the control plane is down", 30*time.Second, func() (bool, string) {
		log := c.attemptLog(prodNode, "prod", 1)
		return strings.Contains(log, prodDone), e2eTailText(log, 2)
	})

	// 5. The control plane again, on the same database: every accepted job
	// is there.
	c.startServe()
	for _, id := range accepted {
		var js service.JobStatus
		if code := c.do(http.MethodGet, "/v1/jobs/"+id, e2eAdminToken, nil, &js); code != http.StatusOK {
			t.Fatalf("after the restart GET /v1/jobs/%s = %d: an accepted job was lost", id, code)
		}
	}

	// 6. The dashboard in headless Chromium: log in, submit a job, see it
	// with its forecast and the utilization chart, meanwhile the jobs run.
	seen := browsertest.DashboardScenario(t, c.url("/"), e2eAdminToken, browsertest.JobInput{
		Name: "dash-job", GPUs: 1, Command: workload(10), Checkpointable: true})
	accepted = append(accepted, seen.ID)
	// The chart above is drawn from /v1/stats; the simulated GPUs of the
	// running jobs, sampled by the agents' collectors into the control
	// plane's SQLite file, must show in it as utilization.
	c.waitFor("GPU utilization from the agents' collectors in /v1/stats", 30*time.Second, func() (bool, string) {
		var st service.Stats
		c.do(http.MethodGet, "/v1/stats?window_s=600", e2eAdminToken, nil, &st)
		best := 0.0
		for _, p := range st.Series {
			best = max(best, p.UtilizationPct)
		}
		return best > 0, fmt.Sprintf("highest utilization_pct %g in %d points", best, len(st.Series))
	})

	// 7. Every accepted job finishes, each attempt on the GPUs the API
	// reported while it ran.
	c.waitFor("every accepted job to succeed", 90*time.Second, func() (bool, string) {
		var pending []string
		for _, id := range accepted {
			js := c.job(id)
			switch js.State {
			case cluster.StateSucceeded:
				continue
			case cluster.StateFailed, cluster.StateCancelled:
				t.Fatalf("job %s ended %s (exit code %v, attempts %d)", id, js.State, js.ExitCode, js.Attempts)
			}
			obs.observe(js)
			pending = append(pending, fmt.Sprintf("%s=%s/%d", id, js.State, js.Attempts))
		}
		return len(pending) == 0, strings.Join(pending, " ")
	})
	stopPolling()

	// 8. Each job's history outlives its placement: a victim's first
	// attempt ran where the API said and was preempted; the production
	// job's log is read back from its node through its agent; energy is
	// integrated from the agents' power telemetry.
	e2eCheckHistory(t, c, obs, accepted, victims, prodNode, prodDone)
	c.stopServe()

	// 9. The checks of what happened, from the agents' side and the store's.
	e2eCheckAttempts(t, c, accepted)
	e2eCheckResumes(t, c, victims)
	e2eCheckStore(t, c, accepted, victims)
	obs.checkDevices()
	c.logProblems()
	t.Logf("end-to-end wall time %.1f s (binary build included)", time.Since(began).Seconds())
}

// e2eCheckHistory checks GET /v1/jobs/{id} history and /log of finished
// jobs on the restarted control plane.
func e2eCheckHistory(t *testing.T, c *e2eCluster, obs *e2eObserver, accepted, victims []string, prodNode, prodDone string) {
	t.Helper()
	for _, id := range victims {
		js := c.job(id)
		if len(js.History) < 2 || js.History[0].EndedBy != "preempted" || js.History[len(js.History)-1].EndedBy != "finished" {
			t.Errorf("history of victim %s: %+v; want a preempted attempt, then a finished one", id, js.History)
			continue
		}
		var gpus []string
		for _, g := range js.History[0].Allocations {
			gpus = append(gpus, fmt.Sprintf("%s/gpu%d", g.Node, g.GPU))
		}
		slices.Sort(gpus)
		if want := obs.placementOf(id, 1); !slices.Equal(gpus, want) {
			t.Errorf("history of %s attempt 1 on %v; the API said %v while it ran", id, gpus, want)
		}
	}
	var log service.JobLog
	if code := c.do(http.MethodGet, "/v1/jobs/prod/log?attempt=1", e2eSubmitToken, nil, &log); code != http.StatusOK ||
		len(log.Nodes) != 1 || log.Nodes[0].Node != prodNode || !strings.Contains(log.Nodes[0].Text, prodDone) {
		t.Errorf("GET /v1/jobs/prod/log = %d %+v; want %s's log with %q", code, log, prodNode, prodDone)
	}
	withEnergy := 0
	for _, id := range accepted {
		js := c.job(id)
		if js.RunS <= 0 || js.GPUHours <= 0 {
			t.Errorf("job %s: run %g s, %g GPU-hours; want both above 0", id, js.RunS, js.GPUHours)
		}
		for _, a := range js.History {
			if a.EnergyKWh != nil && *a.EnergyKWh > 0 {
				withEnergy++
			} else {
				t.Logf("job %s attempt %d: energy unavailable: %s", id, a.Attempt, a.EnergyUnavailable)
			}
		}
	}
	if withEnergy == 0 {
		t.Error("no attempt has an energy from the agents' power telemetry")
	}
}

// e2eStartLine is the first line the workload prints.
var e2eStartLine = regexp.MustCompile(`(?m)^workload start job=(\S+) attempt=(\d+) CUDA_VISIBLE_DEVICES=(\S+) .*resume_step=(\d+) steps=(\d+)$`)

// e2eObserver records, for every attempt seen running, the GPUs the API
// reported it on, and checks them against the CUDA_VISIBLE_DEVICES the
// process printed.
type e2eObserver struct {
	c *e2eCluster

	mu         sync.Mutex
	placements map[string][]string // "job#attempt" → "node/gpuN", sorted
	moved      []string            // attempts seen on two placements
	checked    map[string]bool
}

func newE2EObserver(c *e2eCluster) *e2eObserver {
	return &e2eObserver{c: c, placements: map[string][]string{}, checked: map[string]bool{}}
}

func e2eKey(job string, attempt int) string { return fmt.Sprintf("%s#%d", job, attempt) }

// observe records the placement of a running job and, once its process
// printed its start line, checks it.
func (o *e2eObserver) observe(js service.JobStatus) bool {
	t := o.c.t
	t.Helper()
	if js.State != cluster.StateRunning || len(js.Placement) == 0 {
		return false
	}
	key := e2eKey(string(js.ID), js.Attempts)
	pl := o.record(js)
	o.mu.Lock()
	checked := o.checked[key]
	o.mu.Unlock()
	if checked {
		return true
	}
	node, _, _ := strings.Cut(pl[0], "/")
	log := o.c.attemptLog(node, string(js.ID), js.Attempts)
	if !e2eStartLine.MatchString(log) {
		return false
	}
	o.checkOne(string(js.ID), js.Attempts, node, log)
	o.mu.Lock()
	o.checked[key] = true
	o.mu.Unlock()
	return true
}

// record keeps the placement of a running job's attempt and returns it.
func (o *e2eObserver) record(js service.JobStatus) []string {
	key := e2eKey(string(js.ID), js.Attempts)
	pl := slices.Sorted(slices.Values(js.Placement))
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev, ok := o.placements[key]; ok && !slices.Equal(prev, pl) {
		o.moved = append(o.moved, fmt.Sprintf("%s moved from %v to %v while it ran", key, prev, pl))
	}
	o.placements[key] = pl
	return pl
}

// poll records, every 100 ms until stop is called, the placements of the
// running jobs GET /v1/jobs lists, so that attempts too short for the
// test's own waits are seen too. Errors (the control plane is down) are
// ignored.
func (o *e2eObserver) poll() (stop func()) {
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			req, _ := http.NewRequest(http.MethodGet, o.c.url("/v1/jobs?state=running&limit=1000"), nil)
			req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
			res, err := o.c.client.Do(req)
			if err != nil {
				continue
			}
			var list struct {
				Jobs []service.JobStatus `json:"jobs"`
			}
			err = json.NewDecoder(res.Body).Decode(&list)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				continue
			}
			for _, js := range list.Jobs {
				if js.State == cluster.StateRunning && len(js.Placement) > 0 {
					o.record(js)
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-stopped }) }
}

// checkOne checks that the process of an attempt saw exactly the GPUs its
// placement names, all on its node.
func (o *e2eObserver) checkOne(job string, attempt int, node, log string) {
	t := o.c.t
	t.Helper()
	m := e2eStartLine.FindStringSubmatch(log)
	if m[1] != job || m[2] != strconv.Itoa(attempt) {
		t.Fatalf("the log of %s attempt %d on %s starts with job=%s attempt=%s", job, attempt, node, m[1], m[2])
	}
	var want []string
	placement := o.placementOf(job, attempt)
	for _, g := range placement {
		n, idx, ok := strings.Cut(g, "/gpu")
		if !ok || n != node {
			t.Fatalf("job %s attempt %d: placement %v spans nodes or is not node/gpuN", job, attempt, placement)
		}
		want = append(want, idx)
	}
	slices.SortFunc(want, func(a, b string) int { x, _ := strconv.Atoi(a); y, _ := strconv.Atoi(b); return x - y })
	if got := m[3]; got != strings.Join(want, ",") {
		t.Errorf("job %s attempt %d: the API placed it on %v, its process has CUDA_VISIBLE_DEVICES=%s", job, attempt, placement, got)
	}
}

// allStarted reports whether every job runs and its process has started
// on the GPUs the API reports.
func (o *e2eObserver) allStarted(ids ...string) (bool, string) {
	var waiting []string
	for _, id := range ids {
		js := o.c.job(id)
		if !o.observe(js) {
			waiting = append(waiting, fmt.Sprintf("%s=%s/%d%v", id, js.State, js.Attempts, js.Placement))
		}
	}
	return len(waiting) == 0, strings.Join(waiting, " ")
}

func (o *e2eObserver) placementOf(job string, attempt int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.placements[e2eKey(job, attempt)]
}

// overlaps reports whether the attempt was seen on any of gpus.
func (o *e2eObserver) overlaps(job string, attempt int, gpus []string) bool {
	for _, g := range o.placementOf(job, attempt) {
		if slices.Contains(gpus, g) {
			return true
		}
	}
	return false
}

// checkDevices checks the attempts seen running that were not checked yet,
// and that each attempt the nodes ran was seen running.
func (o *e2eObserver) checkDevices() {
	t := o.c.t
	t.Helper()
	o.mu.Lock()
	placements, moved := maps.Clone(o.placements), slices.Clone(o.moved)
	o.mu.Unlock()
	for _, m := range moved {
		t.Error(m)
	}
	var unseen []string
	for _, a := range o.c.attempts() {
		if _, ok := placements[e2eKey(a.job, a.attempt)]; !ok {
			unseen = append(unseen, e2eKey(a.job, a.attempt))
		}
	}
	if len(unseen) > 0 {
		// An attempt that ran its course while no control plane answered
		// (around the kill) has no placement the API reported.
		t.Logf("never seen running through the API (checked against the agents' state files only): %v", unseen)
	}
	for key, pl := range placements {
		if o.checked[key] {
			continue
		}
		job, n, _ := strings.Cut(key, "#")
		attempt, _ := strconv.Atoi(n)
		node, _, _ := strings.Cut(pl[0], "/")
		log := o.c.attemptLog(node, job, attempt)
		if !e2eStartLine.MatchString(log) {
			t.Errorf("job %s attempt %d was reported running on %v but has no start line in its log on %s", job, attempt, pl, node)
			continue
		}
		o.checkOne(job, attempt, node, log)
	}
	t.Logf("checked the GPUs of %d attempts against their processes' CUDA_VISIBLE_DEVICES", len(placements))
}

// e2eCheckAttempts checks the agents' side: each (job, attempt) has one
// directory on one node whose log says it started once; the agents logged
// one start for it and their state files hold it once, ended; only the
// last attempt of a job exited 0, the earlier ones were stopped.
func e2eCheckAttempts(t *testing.T, c *e2eCluster, accepted []string) {
	t.Helper()
	dirs := map[string]string{}    // key → node
	devices := map[string]string{} // key → CUDA_VISIBLE_DEVICES
	last := map[string]int{}
	for _, a := range c.attempts() {
		key := e2eKey(a.job, a.attempt)
		if prev, ok := dirs[key]; ok {
			t.Errorf("job %s attempt %d has directories on %s and %s", a.job, a.attempt, prev, a.node)
		}
		dirs[key] = a.node
		if n := strings.Count(a.log, "workload start "); n != 1 {
			t.Errorf("job %s attempt %d on %s: %d start lines in its log, want 1:\n%s", a.job, a.attempt, a.node, n, e2eTailText(a.log, 20))
		}
		devices[key] = "?"
		if m := e2eStartLine.FindStringSubmatch(a.log); m != nil {
			devices[key] = m[3]
		}
		last[a.job] = max(last[a.job], a.attempt)
	}
	for _, id := range accepted {
		for n := 1; n <= last[id]; n++ {
			if _, ok := dirs[e2eKey(id, n)]; !ok {
				t.Errorf("job %s: attempt %d of %d has no directory on any node", id, n, last[id])
			}
		}
		if last[id] == 0 {
			t.Errorf("job %s never started on a node", id)
		}
	}
	starts := map[string]int{}
	for node, p := range c.agents {
		for _, rec := range e2eLogRecords(p.log, "started") {
			job, _ := rec["job"].(string)
			attempt, _ := rec["attempt"].(float64)
			starts[e2eKey(job, int(attempt))]++
			if dirs[e2eKey(job, int(attempt))] != node {
				t.Errorf("agent %s logged the start of %s attempt %d, whose directory is on %q", node, job, int(attempt), dirs[e2eKey(job, int(attempt))])
			}
		}
	}
	for key := range dirs {
		if starts[key] != 1 {
			t.Errorf("%s: the agents logged %d starts, want 1", key, starts[key])
		}
	}
	recs := map[string]e2eRecord{}
	for node := range c.agents {
		rs, err := c.stateFile(node)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			key := e2eKey(r.Job, r.Attempt)
			if _, dup := recs[key]; dup {
				t.Errorf("%s is in the agents' state files twice", key)
			}
			recs[key] = r
			if dirs[key] != node {
				t.Errorf("state file of %s holds %s, whose directory is on %q", node, key, dirs[key])
			}
			gpus := make([]string, len(r.GPUs))
			for i, g := range r.GPUs {
				gpus[i] = strconv.Itoa(g)
			}
			if got := devices[key]; got != strings.Join(gpus, ",") {
				t.Errorf("%s: the agent gave it GPUs %v, its process has CUDA_VISIBLE_DEVICES=%s", key, r.GPUs, got)
			}
		}
	}
	for key := range dirs {
		r, ok := recs[key]
		job, _, _ := strings.Cut(key, "#")
		switch {
		case !ok:
			t.Errorf("%s is in no agent's state file", key)
		case !r.Ended:
			t.Errorf("%s: the agent's state file says it still runs", key)
		case r.Attempt == last[job] && (r.ExitCode != 0 || r.Stopped):
			t.Errorf("%s, the last attempt, ended with code %d (stopped %v), want 0", key, r.ExitCode, r.Stopped)
		case r.Attempt < last[job] && !r.Stopped:
			t.Errorf("%s, an earlier attempt, ended with code %d without being stopped", key, r.ExitCode)
		}
	}
	t.Logf("%d attempts on the nodes, each started once", len(dirs))
}

var e2eCheckpointLine = regexp.MustCompile(`(?m)^checkpoint step=(\d+) path=\S+ \((\w+)\)$`)

// e2eCheckResumes checks that each preempted job was asked to checkpoint
// in its first attempt, checkpointed, was stopped (SIGTERM, on which it
// checkpoints again), and that every later attempt resumed from the newest
// checkpoint of the attempts before it; the last one finished. (A victim
// may be preempted again after it resumed: a standard job outranks it too.)
func e2eCheckResumes(t *testing.T, c *e2eCluster, victims []string) {
	t.Helper()
	byKey := map[string]e2eAttempt{}
	last := map[string]int{}
	for _, a := range c.attempts() {
		byKey[e2eKey(a.job, a.attempt)] = a
		last[a.job] = max(last[a.job], a.attempt)
	}
	for _, id := range victims {
		if last[id] < 2 {
			t.Errorf("victim %s ran %d attempt(s); want a second one that resumes", id, last[id])
			continue
		}
		newest := 0 // the newest checkpoint's step so far
		for n := 1; n <= last[id]; n++ {
			a := byKey[e2eKey(id, n)]
			m := e2eStartLine.FindStringSubmatch(a.log)
			if m == nil {
				t.Errorf("victim %s attempt %d: no start line:\n%s", id, n, e2eTailText(a.log, 5))
				break
			}
			if resumed, _ := strconv.Atoi(m[4]); resumed != newest {
				t.Errorf("victim %s attempt %d resumed from step %d; the newest checkpoint before it is step %d", id, n, resumed, newest)
			}
			var whys []string
			for _, cp := range e2eCheckpointLine.FindAllStringSubmatch(a.log, -1) {
				newest, _ = strconv.Atoi(cp[1])
				whys = append(whys, cp[2])
			}
			stoppedAfterRequest := e2eSubsequence(whys, []string{"request", "stop"})
			switch {
			case n == 1 && !stoppedAfterRequest:
				t.Errorf("victim %s attempt 1 was not asked to checkpoint and then stopped (checkpoints: %v):\n%s", id, whys, e2eTailText(a.log, 15))
			case n < last[id] && !slices.Contains(whys, "stop"):
				t.Errorf("victim %s attempt %d was followed by another but did not checkpoint on SIGTERM:\n%s", id, n, e2eTailText(a.log, 15))
			case n == last[id] && !strings.Contains(a.log, "done: "+m[5]+" steps"):
				t.Errorf("victim %s: its last attempt %d did not finish its steps:\n%s", id, n, e2eTailText(a.log, 5))
			}
			if n == 2 && newest > 0 {
				t.Logf("victim %s: preempted in attempt 1, resumed from step %s in attempt 2 on %s", id, m[4], a.node)
			}
		}
		if m := e2eStartLine.FindStringSubmatch(byKey[e2eKey(id, 2)].log); m != nil && m[4] == "0" {
			t.Errorf("victim %s: attempt 2 started afresh, not from a checkpoint", id)
		}
	}
}

// e2eCheckStore checks the store's side: every accepted job succeeded, its
// started events are its attempts, as many as the nodes ran; the victims'
// events say checkpoint requested, checkpointed, preempted, started again.
func e2eCheckStore(t *testing.T, c *e2eCluster, accepted, victims []string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, c.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	onNodes := map[string]int{}
	for _, a := range c.attempts() {
		onNodes[a.job]++
	}
	for _, id := range accepted {
		j, err := st.GetJob(ctx, cluster.JobID(id))
		if err != nil {
			t.Errorf("job %s: %v", id, err)
			continue
		}
		evs, err := st.Events(ctx, cluster.JobID(id))
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		started := 0
		for _, e := range evs {
			types = append(types, string(e.Type))
			if e.Type == store.EventStarted {
				started++
			}
		}
		if j.State != cluster.StateSucceeded || started != j.Attempts || j.Attempts != onNodes[id] {
			t.Errorf("job %s: %s with %d attempts, %d started events, %d attempts on the nodes; want succeeded and all equal; events %v",
				id, j.State, j.Attempts, started, onNodes[id], types)
		}
		if slices.Contains(victims, id) {
			want := []string{string(store.EventCheckpointRequested), string(store.EventCheckpointed), string(store.EventPreempted), string(store.EventStarted)}
			if !e2eSubsequence(types, want) || j.Attempts < 2 {
				t.Errorf("victim %s: events %v, %d attempts; want %v in that order and 2 attempts at least", id, types, j.Attempts, want)
			}
		}
	}
}

// e2eSubsequence reports whether want appears in order (not necessarily
// adjacent) in have.
func e2eSubsequence(have, want []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}
