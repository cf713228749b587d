package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/controltest"
	"github.com/prescient-sched/prescient/internal/browsertest"
	"github.com/prescient-sched/prescient/service"
)

// The tests of this file check one view of the dashboard each, in headless
// Chromium over the fake control plane, and keep a screenshot of it (at the
// browser's 1,400 x 1,000 window) in browsertest.ViewsDir(): set
// PRESCIENT_SCREENSHOTS to keep them elsewhere.

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// shoot scrolls the panel with that id to the top of the window and keeps
// a screenshot of the window as name.png.
func shoot(b *browsertest.Browser, panelID, name string) {

	if panelID != "" {
		browsertest.Eval[bool](b, "scroll to #"+panelID,
			`(document.getElementById(`+js(panelID)+`).scrollIntoView({ block: 'start' }), true)`)
	}
	b.ShootView(name)
}

// waitFor polls each check until it holds.
func waitFor(b *browsertest.Browser, checks ...[2]string) {

	for _, c := range checks {
		browsertest.Poll[bool](b, "wait for "+c[0], c[1], browsertest.ScenarioTimeout)
	}
}

// openJob clicks the job's name in the job list and waits for its detail.
func openJob(b *browsertest.Browser, id string) {

	row := `#jobs tr[data-job-id=` + js(id) + `]`
	b.Do("click job "+id, chromedp.Click(chromedp.CSS(row+` .job-name`)))
	browsertest.Poll[bool](b, "wait for the detail of job "+id, `(() => {
		const d = document.getElementById('job-dialog');
		return d.open && d.dataset.jobId === `+js(id)+` && d.dataset.loaded === 'true';
	})()`, browsertest.ScenarioTimeout)
}

// answerConfirmation waits for the page's confirmation dialog, checks that
// it says want, and confirms or keeps things as they are.
func answerConfirmation(b *browsertest.Browser, want string, confirm bool) {

	msg := browsertest.Poll[string](b, "wait for the confirmation dialog", `(() => {
		const d = document.getElementById('confirm-dialog');
		return d.open ? document.getElementById('confirm-title').textContent + ' ' + document.getElementById('confirm-message').textContent : '';
	})()`, browsertest.ScenarioTimeout)
	if !strings.Contains(msg, want) {
		b.Fail("read the confirmation", fmt.Errorf("it says %q, want %q in it", msg, want))
	}
	button := "confirm-cancel"
	if confirm {
		button = "confirm-ok"
	}
	b.Do("answer the confirmation", chromedp.Click(chromedp.ID(button)))
	browsertest.Poll[bool](b, "wait for the confirmation to close", `!document.getElementById('confirm-dialog').open`, browsertest.ScenarioTimeout)
}

// refreshNow refreshes the page at once and waits for it.
func refreshNow(b *browsertest.Browser) {

	ctx, cancel := context.WithTimeout(b.Context(), browsertest.StepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.PrescientDashboard.refresh().then(() => true)`, chromedp.EvalAwaitPromise)); err != nil {
		b.Fail("refresh the page", err)
	}
}

func submitAs(t *testing.T, f *controltest.Fake, tenant, name string, tier cluster.Tier, gpus int) service.JobStatus {
	t.Helper()
	st, err := f.Submit(context.Background(), service.SubmitRequest{Spec: cluster.JobSpec{
		Name: name, Tenant: tenant, Tier: tier, GPUs: gpus, GPUMilli: cluster.MilliGPU}})
	must(t, err)
	return st
}

// TestJobDetailShowsAttemptsEventsAndLog opens a job that was preempted and
// runs again: the detail shows its fields, both attempts with their GPUs,
// times, GPU-hours, energy (unavailable, with the reason) and what ended
// the first, every event, and the log of each attempt per node, the
// unavailable one with its reason. Escape closes it.
func TestJobDetailShowsAttemptsEventsAndLog(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: now.Add(-2 * time.Hour)}
	s := newStack(t, controltest.WithClock(clock.now))
	f := s.fake
	job := submitAs(t, f, "ml", "bert-finetune", cluster.TierBatch, 2)
	clock.advance(10 * time.Minute)
	must(t, f.Start(job.ID, "dgx-1", 0, 1))
	clock.advance(30 * time.Minute)
	must(t, f.Preempt(job.ID, "a production job needed dgx-1"))
	clock.advance(10 * time.Minute)
	must(t, f.Start(job.ID, "dgx-2", 4, 5))
	clock.set(now)
	f.SetJobLog(job.ID, 2, "dgx-2", "resumed from step 1200\nstep 1300 loss 1.92\nstep 1400 loss 1.87\n")
	id := string(job.ID)

	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	openJob(b, id)
	waitFor(b,
		[2]string{"the job's fields", `document.querySelector('#job-fields [data-field="Attempts"]').textContent === '2' &&
			document.querySelector('#job-fields [data-field="Last error"]').textContent === 'a production job needed dgx-1' &&
			document.querySelector('#job-fields [data-field="GPU-hours"]').textContent === '3.33'`},
		[2]string{"attempt 1 on dgx-1, requeued with its reason", `(() => {
			const r = document.querySelector('#job-attempts tr[data-attempt="1"]');
			return r.querySelector('.gpus-cell').textContent === 'dgx-1/gpu0, dgx-1/gpu1' && r.textContent.includes('30.0 min') &&
				r.querySelector('.ended-by').textContent === 'requeueda production job needed dgx-1';
		})()`},
		[2]string{"attempt 2 running on dgx-2", `(() => {
			const r = document.querySelector('#job-attempts tr[data-attempt="2"]');
			return r.querySelector('.gpus-cell').textContent === 'dgx-2/gpu4, dgx-2/gpu5' && r.textContent.includes('running') &&
				r.textContent.includes('70.0 min');
		})()`},
		[2]string{"the energy unavailable, with the reason", `[...document.querySelectorAll('#job-attempts .energy')].every(e =>
			e.textContent === 'unavailable: the fake control plane reads no power telemetry')`},
		[2]string{"every event", `[...document.querySelectorAll('#job-events tr[data-event]')].map(r => r.dataset.event).join() ===
			'submitted,started,requeued,started' &&
			document.querySelector('#job-events tr[data-event="requeued"]').textContent.includes('running → queued')`},
		[2]string{"the newest attempt's log on dgx-2", `document.querySelector('#job-log [data-log-node="dgx-2"] pre.log').textContent.includes('step 1400 loss 1.87') &&
			document.getElementById('job-log-attempt').value === '2'`},
	)
	shoot(b, "", "job-detail")

	b.Do("show the first attempt's log", browsertest.SetField("job-log-attempt", "1"))
	waitFor(b, [2]string{"dgx-1's log unavailable, with the reason",
		`document.querySelector('#job-log [data-log-node="dgx-1"] .unavailable')?.textContent === 'unavailable: the fake control plane keeps no logs'`})

	b.Do("press Escape", chromedp.KeyEvent(kb.Escape))
	waitFor(b, [2]string{"the detail to close, back on the list", `!document.getElementById('job-dialog').open &&
		!!document.querySelector('#jobs tr[data-job-id=` + js(id) + `]')`})
}

// TestCancelAsksForConfirmation cancels a job from the list: keeping it
// (the button, then Escape) changes nothing; confirming cancels it.
func TestCancelAsksForConfirmation(t *testing.T) {
	s := newStack(t)
	st := submitAs(t, s.fake, "ml", "to-cancel", cluster.TierStandard, 1)
	id := string(st.ID)
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	row := `#jobs tr[data-job-id=` + js(id) + `]`
	cancelButton := chromedp.CSS(row + ` button[data-cancel]`)
	stillQueued := func(after string) {
		t.Helper()
		refreshNow(b)
		if got, _ := s.fake.Job(context.Background(), st.ID); got.State != cluster.StateQueued {
			t.Fatalf("after %s the control plane has the job %s, want queued", after, got.State)
		}
		waitFor(b, [2]string{"the job still queued", `document.querySelector('` + row + `').dataset.state === 'queued'`})
	}

	b.Do("click Cancel", chromedp.Click(cancelButton))
	answerConfirmation(b, "Cancel job "+id, false)
	stillQueued("keeping it")

	b.Do("click Cancel again", chromedp.Click(cancelButton))
	browsertest.Poll[bool](b, "wait for the confirmation", `document.getElementById('confirm-dialog').open`, browsertest.ScenarioTimeout)
	b.Do("press Escape", chromedp.KeyEvent(kb.Escape))
	browsertest.Poll[bool](b, "wait for the confirmation to close", `!document.getElementById('confirm-dialog').open`, browsertest.ScenarioTimeout)
	stillQueued("Escape")

	b.Do("click Cancel a third time", chromedp.Click(cancelButton))
	browsertest.Poll[bool](b, "wait for the confirmation", `document.getElementById('confirm-dialog').open`, browsertest.ScenarioTimeout)
	shoot(b, "", "cancel-confirmation")
	answerConfirmation(b, "cannot be undone", true)
	waitFor(b, [2]string{"the job to show cancelled",
		`document.querySelector('` + row + `').dataset.state === 'cancelled' && !document.querySelector('` + row + ` button[data-cancel]')`})
	if got, _ := s.fake.Job(context.Background(), st.ID); got.State != cluster.StateCancelled {
		t.Errorf("the control plane has the job %s, want cancelled", got.State)
	}
}

// TestJobsFilterByTenantAndStateAndPage filters the job list as an admin
// by tenant and by state, pages through it with next, and checks that a
// viewer sees their own tenant's jobs with no tenant filter.
func TestJobsFilterByTenantAndStateAndPage(t *testing.T) {
	s := newStack(t)
	f := s.fake
	var first service.JobStatus
	for i := range 52 {
		st := submitAs(t, f, "ml", fmt.Sprintf("sweep-%02d", i), cluster.TierBatch, 1)
		if i == 0 {
			first = st
		}
	}
	mlRunning := submitAs(t, f, "ml", "train", cluster.TierStandard, 2)
	must(t, f.Start(mlRunning.ID, "dgx-1", 0, 1))
	visRunning := submitAs(t, f, "vision", "detector", cluster.TierProduction, 4)
	must(t, f.Start(visRunning.ID, "dgx-2", 0, 1, 2, 3))
	visFailed := submitAs(t, f, "vision", "segmenter", cluster.TierStandard, 2)
	must(t, f.Start(visFailed.ID, "dgx-2", 4, 5))
	must(t, f.Finish(visFailed.ID, 1, "NCCL timeout"))
	submitAs(t, f, "vision", "captioner", cluster.TierBatch, 1)

	rows := `[...document.querySelectorAll('#jobs tr[data-job-id]')]`
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, adminToken)
	waitFor(b, [2]string{"a full first page of every tenant's jobs, and a next one",
		rows + `.length === 50 && !document.getElementById('jobs-older').disabled && document.getElementById('jobs-newer').disabled`})

	b.Do("filter tenant vision", browsertest.SetField("filter-tenant", "vision"))
	waitFor(b, [2]string{"vision's three jobs only", rows + `.length === 3 && ` + rows + `.every(r => r.querySelector('.tenant').textContent === 'vision')`})
	b.Do("tick running", chromedp.Click(chromedp.CSS(`#filter-states input[value="running"]`)))
	waitFor(b, [2]string{"vision's running job only", rows + `.map(r => r.dataset.jobId).join() === ` + js(string(visRunning.ID))})
	b.Do("tick failed", chromedp.Click(chromedp.CSS(`#filter-states input[value="failed"]`)))
	waitFor(b, [2]string{"vision's running and failed jobs", rows + `.length === 2 && ` + rows + `.every(r => ['running', 'failed'].includes(r.dataset.state))`})
	shoot(b, "jobs-panel", "jobs-filtered")

	b.Do("clear the filters", chromedp.Click(chromedp.ID("filter-clear")))
	waitFor(b, [2]string{"every job again", rows + `.length === 50`})
	b.Do("page to older jobs", chromedp.Click(chromedp.ID("jobs-older")))
	waitFor(b, [2]string{"the second page with the oldest job", rows + `.length === 6 && ` + rows + `.at(-1).dataset.jobId === ` + js(string(first.ID)) +
		` && document.getElementById('jobs-page').textContent === 'page 2' && document.getElementById('jobs-older').disabled`})
	b.Do("page back to newer jobs", chromedp.Click(chromedp.ID("jobs-newer")))
	waitFor(b, [2]string{"the first page again", rows + `.length === 50 && document.getElementById('jobs-page').textContent === 'page 1'`})

	b.Do("log out", chromedp.Click(chromedp.ID("logout")))
	browsertest.Login(b, viewerToken)
	waitFor(b, [2]string{"no tenant filter, the viewer's own tenant instead",
		`document.getElementById('filter-tenant-label').hidden && document.getElementById('filter-tenant-own').textContent === 'tenant ml'`})
	b.Do("tick running", chromedp.Click(chromedp.CSS(`#filter-states input[value="running"]`)))
	waitFor(b, [2]string{"ml's running job only", rows + `.map(r => r.dataset.jobId).join() === ` + js(string(mlRunning.ID))})
}

// TestWhatIfShowsBothPlans asks what happens if a production job arrives
// and a node goes: the page shows both plans' figures and each job's start
// and end now and in the scenario, as the API answers them.
func TestWhatIfShowsBothPlans(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	clock := &testClock{t: now}
	s := newStack(t, controltest.WithClock(clock.now))
	f := s.fake
	run := submitAs(t, f, "ml", "pretrain", cluster.TierStandard, 8)
	must(t, f.Start(run.ID, "dgx-1", 0, 1, 2, 3, 4, 5, 6, 7))
	queued := submitAs(t, f, "ml", "finetune", cluster.TierBatch, 4)
	small := submitAs(t, f, "ml", "eval", cluster.TierBatch, 1)

	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	b.Do("ask with no change", chromedp.Click(chromedp.ID("whatif-button")))
	waitFor(b, [2]string{"the form to ask for a change", `document.getElementById('whatif-result').textContent.startsWith('Ask for a change')`})

	waitFor(b, [2]string{"the nodes to remove", `!!document.querySelector('#whatif-remove-node option[value="dgx-2"]')`})
	b.Do("fill in the what-if",
		browsertest.SetField("whatif-gpus", "8"),
		browsertest.SetField("whatif-tier", "production"),
		browsertest.SetField("whatif-labels", "workload=llm"),
		browsertest.SetField("whatif-remove-job", string(small.ID)),
		browsertest.SetField("whatif-remove-node", "dgx-2"),
		chromedp.Click(chromedp.ID("whatif-button")))
	waitFor(b, [2]string{"the answer", `document.getElementById('whatif-result').dataset.state === 'done'`})

	want, err := f.WhatIf(context.Background(), service.WhatIfRequest{
		AddJobs:     []service.SubmitRequest{{Spec: cluster.JobSpec{Tenant: "ml", Tier: cluster.TierProduction, GPUs: 8, GPUMilli: cluster.MilliGPU, Labels: map[string]string{"workload": "llm"}}}},
		RemoveJobs:  []cluster.JobID{small.ID},
		RemoveNodes: []string{"dgx-2"},
	})
	must(t, err)
	var added, moved service.WhatIfJob
	for _, j := range want.Jobs {
		switch j.Job {
		case "whatif-1":
			added = j
		case queued.ID:
			moved = j
		}
	}
	if added.Start == nil || moved.DeltaEndS == nil || *moved.DeltaEndS <= 0 {
		t.Fatalf("the fake's what-if: added %+v, %s %+v; want the added job to start and %s to end later", added, queued.ID, moved, queued.ID)
	}
	stamp := func(tm *time.Time) string { return tm.UTC().Format("2006-01-02 15:04:05Z") }
	waitFor(b,
		[2]string{"the question said back", `document.getElementById('whatif-result').textContent.includes('add a production job of 8 GPUs, remove job ` + string(small.ID) + `, remove node dgx-2')`},
		[2]string{"the makespan now and in the scenario", `(() => {
			const c = document.querySelectorAll('#whatif-result tr[data-figure="makespan"] td');
			return c.length === 3 && c[0].textContent !== c[1].textContent && c[2].textContent.startsWith('+');
		})()`},
		[2]string{"the mean wait and the deadlines", `!!document.querySelector('#whatif-result tr[data-figure="mean-wait"]') &&
			document.querySelector('#whatif-result tr[data-figure="deadlines"]').textContent.includes('none set')`},
		[2]string{"the added job first, with its start", `(() => {
			const r = document.querySelector('#whatif-result tr[data-whatif-job]');
			return r.dataset.whatifJob === 'whatif-1' && r.textContent.includes('added') && r.textContent.includes(` + js(stamp(added.Start)) + `);
		})()`},
		[2]string{"the queued job's end, later", `(() => {
			const r = document.querySelector('#whatif-result tr[data-whatif-job=` + js(string(queued.ID)) + `]');
			return r.textContent.includes(` + js(stamp(moved.BaselineEnd)) + `) && r.textContent.includes(` + js(stamp(moved.End)) + `) &&
				r.querySelector('.delta').textContent.startsWith('+');
		})()`},
		[2]string{"no row of the removed job", `!document.querySelector('#whatif-result tr[data-whatif-job=` + js(string(small.ID)) + `]')`},
		[2]string{"no stray null where no horizon is said", `![...document.querySelectorAll('#whatif-result > p')].some(p => p.textContent === 'null') &&
			!document.getElementById('whatif-result').textContent.includes('null')`},
	)
	shoot(b, "whatif-panel", "whatif")
	if jobs, _ := f.Jobs(context.Background(), service.JobQuery{}); len(jobs) != 3 {
		t.Errorf("the control plane holds %d jobs after a what-if, want the 3 it had", len(jobs))
	}
}

// TestWhatIfTriesChangedTenants: an admin copies the tenants in force into
// the what-if form as a tenants file's list, edits a quota and asks; the
// question carries the edited tenants, and one the API refuses says the
// entry and field. A submitter, who may not read the tenants, has no copy
// button.
func TestWhatIfTriesChangedTenants(t *testing.T) {
	s := newStack(t)
	f := s.fake
	two := 2
	f.SetQuotaUsage([]service.QuotaUsage{{Tenant: "ml", Cohort: "lab", NominalGPUs: 8, HeldGPUs: 4},
		{Tenant: "ops", Cohort: "lab", NominalGPUs: 8, LendingLimitGPUs: &two}})
	submitAs(t, f, "ml", "finetune", cluster.TierBatch, 4)

	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, submitterToken)
	waitFor(b, [2]string{"no copy of the tenants for a submitter", `document.getElementById('whatif-tenants-load').hidden`})
	b.Do("log out", chromedp.Click(chromedp.ID("logout")))
	browsertest.Login(b, adminToken)
	waitFor(b, [2]string{"the copy button for an admin", `!document.getElementById('whatif-tenants-load').hidden`})
	b.Do("copy the tenants in force", chromedp.Click(chromedp.ID("whatif-tenants-load")))
	var copied []map[string]any
	waitFor(b, [2]string{"the tenants as a file's list", `(() => {
		const v = document.getElementById('whatif-tenants').value;
		if (!v) return false;
		const l = JSON.parse(v);
		return l.length === 2 && l[0].name === 'ml' && l[0].cohort === 'lab' && l[0].quota[0].gpus === 8 &&
			l[1].quota[0].lending_limit === 2 && !('tiers' in l[0]) && !('reclaim' in l[0]);
	})()`})
	must(t, json.Unmarshal([]byte(browsertest.Eval[string](b, "the copy", `document.getElementById('whatif-tenants').value`)), &copied))
	copied[0]["quota"] = []map[string]any{{"gpus": 16}}
	edited, err := json.Marshal(copied)
	must(t, err)

	b.Do("ask with tenants that are not JSON", browsertest.SetField("whatif-tenants", "tenants:\n  - name: ml"),
		chromedp.Click(chromedp.ID("whatif-button")))
	waitFor(b, [2]string{"the form's error", `document.getElementById('whatif-result').textContent.startsWith('tenants: not JSON')`})
	b.Do("ask with a reclaim policy that is not one", browsertest.SetField("whatif-tenants", `[{"name": "ml", "reclaim": "sometimes"}]`),
		chromedp.Click(chromedp.ID("whatif-button")))
	waitFor(b, [2]string{"the API's error naming the entry", `(() => {
		const t = document.getElementById('whatif-result').textContent;
		return t.includes('tenants[0]') && t.includes('reclaim') && t.includes('sometimes');
	})()`})
	b.Do("ask with ml's quota doubled", browsertest.SetField("whatif-tenants", string(edited)), chromedp.Click(chromedp.ID("whatif-button")))
	waitFor(b, [2]string{"the answer", `document.getElementById('whatif-result').dataset.state === 'done' &&
		document.getElementById('whatif-result').textContent.includes('put 2 tenants in force')`})
	asked := f.WhatIfsAsked()
	if len(asked) != 1 {
		t.Fatalf("%d what-ifs reached the control plane, want the one the API accepted", len(asked))
	}
	ts := asked[0].Tenants
	if len(ts) != 2 || ts[0].Name != "ml" || ts[0].Cohort != "lab" || ts[0].Quota[0].GPUs != 16 ||
		ts[1].Quota[0].GPUs != 8 || ts[1].Quota[0].LendingLimit == nil || *ts[1].Quota[0].LendingLimit != 2 {
		t.Errorf("the tenants asked with: %+v", ts)
	}
	shoot(b, "whatif-panel", "whatif-tenants")
}

// bigFleet is 125 nodes of 8 GPUs: 100 of A100s, 25 of H100s.
func bigFleet() []cluster.Node {
	nodes := make([]cluster.Node, 125)
	for i := range nodes {
		model := "A100-SXM4-80GB"
		if i >= 100 {
			model = "H100-SXM5-80GB"
		}
		nodes[i] = clustertest.Node(fmt.Sprintf("gpu-%03d", i)).GPUs(8, model).Obj()
	}
	return nodes
}

// TestFleetOf1000GPUsAggregatesByNode shows a fleet of 125 nodes x 8 = 1,000
// GPUs: one row per node with its GPUs allocated, mean utilization and
// model; a click expands a node into its GPU tiles. Drawing it must stay
// fast enough to refresh every five seconds.
func TestFleetOf1000GPUsAggregatesByNode(t *testing.T) {
	s := newStack(t, controltest.WithNodes(bigFleet()...))
	f := s.fake
	// Node i runs i%9 one-GPU jobs; every GPU reports telemetry, busy ones more.
	for i, n := range bigFleet() {
		for g := range i % 9 {
			st := submitAs(t, f, "ml", fmt.Sprintf("j-%s-%d", n.Name, g), cluster.TierBatch, 1)
			must(t, f.Start(st.ID, n.Name, g))
		}
		for g := range 8 {
			util := 2.0
			if g < i%9 {
				util = 60 + float64(i%5)*5
			}
			f.SetGPUTelemetry(cluster.GPURef{Node: n.Name, Index: g}, controltest.GPUTelemetry{UtilizationPct: util, MemoryUsedBytes: 10 << 30, PowerW: 100 + 3*util})
		}
	}
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, adminToken)
	nodeRow := func(name string) string { return `#fleet tr.node-row[data-node="` + name + `"]` }
	waitFor(b,
		[2]string{"one row per node, no GPU tiles", `document.getElementById('fleet').dataset.view === 'nodes' &&
			document.querySelectorAll('#fleet tr.node-row').length === 125 && document.querySelectorAll('#fleet [data-gpu]').length === 0`},
		[2]string{"the summary of 1,000 GPUs", `document.querySelector('#summary-gpus .card-value').textContent === '1000'`},
		// gpu-017: 17 % 9 = 8 jobs, all GPUs at 60 + 2*5 = 70 %.
		[2]string{"a full node's allocation, utilization and model", `(() => {
			const r = document.querySelector('` + nodeRow("gpu-017") + `');
			return r.querySelector('.allocated').textContent === '8 / 8' && r.querySelector('.util').textContent === '70 %' &&
				r.querySelector('.model').textContent === 'A100-SXM4-80GB' && r.querySelectorAll('.strip .cell.full').length === 8;
		})()`},
		// gpu-103: 103 % 9 = 4 jobs at 60 + 3*5 = 75 %, four idle at 2 %: a mean of 38.5 %.
		[2]string{"a half-used H100 node", `(() => {
			const r = document.querySelector('` + nodeRow("gpu-103") + `');
			return r.querySelector('.allocated').textContent === '4 / 8' && r.querySelector('.util').textContent === '39 %' &&
				r.querySelector('.model').textContent === 'H100-SXM5-80GB' && r.querySelector('.node-jobs').textContent === '4 jobs';
		})()`},
	)
	// Each refresh redraws the fleet; the median of five says what it
	// costs on this machine, whatever else runs on it.
	var draws []float64
	var refreshes []time.Duration
	for range 5 {
		began := time.Now()
		refreshNow(b)
		refreshes = append(refreshes, time.Since(began).Round(time.Millisecond))
		ms, err := strconv.ParseFloat(browsertest.Eval[string](b, "read the fleet's drawing time", `document.getElementById('fleet').dataset.renderMs`), 64)
		must(t, err)
		draws = append(draws, ms)
	}
	slices.Sort(draws)
	t.Logf("1,000 GPUs: the fleet panel drew in %v ms; whole refreshes (every API call and panel) took %v", draws, refreshes)
	if draws[2] > 1000 {
		t.Errorf("the fleet of 1,000 GPUs draws in a median %.0f ms; want under a fifth of the 5 s between refreshes", draws[2])
	}

	b.Do("expand gpu-103", chromedp.Click(chromedp.CSS(nodeRow("gpu-103")+` .expand`)))
	waitFor(b, [2]string{"gpu-103's eight GPUs, with their jobs", `document.querySelectorAll('#fleet [data-node-gpus="gpu-103"] [data-gpu^="gpu-103/"]').length === 8 &&
		document.querySelectorAll('#fleet [data-node-gpus="gpu-103"] .gpu-job').length === 4 && document.querySelectorAll('#fleet [data-gpu]').length === 8 &&
		document.querySelector('` + nodeRow("gpu-103") + `').getAttribute('aria-expanded') === 'true'`})
	refreshNow(b)
	waitFor(b, [2]string{"the node still expanded after a refresh", `document.querySelectorAll('#fleet [data-gpu^="gpu-103/"]').length === 8`})
	browsertest.Eval[bool](b, "scroll to the expanded node", `(() => {
		document.getElementById('fleet-panel').scrollIntoView({ block: 'start' });
		const box = document.querySelector('#fleet .fleet-scroll');
		box.scrollTop = document.querySelector('`+nodeRow("gpu-100")+`').offsetTop - box.querySelector('thead').offsetHeight;
		return true;
	})()`)
	b.ShootView("fleet-1000-gpus")
	b.Do("collapse gpu-103", chromedp.Click(chromedp.CSS(nodeRow("gpu-103")+` .expand`)))
	waitFor(b, [2]string{"no GPU tiles again", `document.querySelectorAll('#fleet [data-gpu]').length === 0`})
}

// TestModelsAndModePanels shows the published models and the mode; an admin
// switches to autopilot (keeping the mode once, then confirming), and a
// viewer, logged in after, sees the mode without the switch or what the
// admin's session said.
func TestModelsAndModePanels(t *testing.T) {
	created := time.Now().UTC().Add(-48 * time.Hour).Truncate(time.Hour)
	metrics := func(selected string, mae float64) map[string]map[string]float64 {
		return map[string]map[string]float64{
			selected:   {"mae_s": mae, "p90_coverage": 0.91, "mape": 0.23},
			"baseline": {"mae_s": 1480, "p90_coverage": 0.72, "mape": 0.61},
		}
	}
	s := newStack(t, controltest.WithModels(
		service.ModelVersion{Target: "duration", Version: 1, CreatedAt: created, Selected: "forest", Metrics: metrics("forest", 610),
			DataFrom: created.Add(-30 * 24 * time.Hour), DataUntil: created},
		service.ModelVersion{Target: "duration", Version: 2, Current: true, Serving: true, CreatedAt: created.Add(24 * time.Hour),
			Selected: "ensemble", Metrics: metrics("ensemble", 540), DataFrom: created.Add(-29 * 24 * time.Hour), DataUntil: created.Add(24 * time.Hour)},
		service.ModelVersion{Target: "memory", Version: 1, Current: true, Serving: true, CreatedAt: created, Selected: "quantile-gbm",
			Metrics: map[string]map[string]float64{"quantile-gbm": {"p90_coverage": 0.93, "mae_bytes": 2.1e9}}},
	))
	b := browsertest.Start(t)
	browsertest.Open(b, s.url)
	browsertest.Login(b, adminToken)
	waitFor(b,
		[2]string{"each target with its versions", `document.querySelectorAll('#models [data-target="duration"] tr[data-version]').length === 2 &&
			!!document.querySelector('#models [data-target="memory"] tr[data-version="1"]')`},
		[2]string{"the current, serving version and its learner", `(() => {
			const r = document.querySelector('#models [data-target="duration"] tr[data-version="2"]');
			return r.querySelector('.current').textContent === 'current' && r.querySelector('.serving').textContent === 'serving' &&
				r.querySelector('.selected').textContent === 'ensemble';
		})()`},
		[2]string{"the selected learner's metrics beside the baseline's", `(() => {
			const r = document.querySelector('#models [data-target="duration"] .metrics tr.selected[data-learner="ensemble"]');
			return !!r && r.textContent.includes('9.0 min') && !!document.querySelector('#models [data-target="duration"] .metrics tr[data-learner="baseline"]');
		})()`},
		[2]string{"the mode and the admin's switch", `document.getElementById('mode-value').textContent === 'advisor' &&
			!document.getElementById('mode-switch').hidden && document.getElementById('mode-switch').textContent === 'Switch to autopilot' &&
			document.getElementById('mode-note').hidden`},
	)

	b.Do("switch the mode", chromedp.Click(chromedp.ID("mode-switch")))
	answerConfirmation(b, "Switch to autopilot", false)
	if m := s.fake.Mode(); m != service.ModeAdvisor {
		t.Fatalf("after keeping the mode the control plane is in %s, want advisor", m)
	}
	b.Do("switch the mode again", chromedp.Click(chromedp.ID("mode-switch")))
	answerConfirmation(b, "Switch to autopilot", true)
	waitFor(b, [2]string{"autopilot", `document.getElementById('mode-panel').dataset.mode === 'autopilot' &&
		document.getElementById('mode').textContent === 'autopilot' && document.getElementById('mode-switch').textContent === 'Switch to advisor'`})
	if m := s.fake.Mode(); m != service.ModeAutopilot {
		t.Errorf("after the switch the control plane is in %s, want autopilot", m)
	}
	shoot(b, "models-panel", "models-and-mode")

	b.Do("log out", chromedp.Click(chromedp.ID("logout")))
	browsertest.Login(b, viewerToken)
	waitFor(b, [2]string{"the mode without the switch", `document.getElementById('mode-value').textContent === 'autopilot' &&
		getComputedStyle(document.getElementById('mode-switch')).display === 'none' &&
		document.getElementById('mode-note').textContent.includes('viewer of tenant ml') && document.getElementById('mode-result').hidden`})
	shoot(b, "mode-panel", "mode-viewer")
}
