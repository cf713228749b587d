package slurm_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/internal/slurmtest"
	"github.com/prescient-sched/prescient/slurm"
)

// fixedEstimator expects every job to run two minutes and recommends a
// five-minute limit; it counts the accounting documents it hears and the
// most jobs one held.
type fixedEstimator struct{ learned, mostJobs int }

func (f *fixedEstimator) Estimate(_ context.Context, jobs []slurm.Job) (map[string]slurm.Estimate, error) {
	out := map[string]slurm.Estimate{}
	for _, j := range jobs {
		out[j.ID] = slurm.Estimate{RunP50: 2 * time.Minute, Limit: 5 * time.Minute, Source: "fixed", LimitWhy: "(fixed)"}
	}
	return out, nil
}

func (f *fixedEstimator) Learn(_ context.Context, acct []byte) error {
	if !strings.HasPrefix(strings.TrimSpace(string(acct)), "{") {
		return os.ErrInvalid
	}
	f.learned++
	f.mostJobs = max(f.mostJobs, strings.Count(string(acct), `"job_id"`))
	return nil
}

// fullCluster starts a real Slurm and a job that holds every GPU of it
// for five minutes, so that the jobs submitted next pend.
func fullCluster(t *testing.T) (c *slurmtest.Cluster, cli *slurm.CLI, hog string) {
	t.Helper()
	c = slurmtest.Start(t)
	cli = &slurm.CLI{Conf: c.Conf}
	hog = c.Sbatch(t, "-J", "hog", "-t", "60", "--gres=gpu:4", "--wrap", "sleep 300")
	if err := waitFor(func() bool { return jobByID(t, cli, hog).Running() }); err != nil {
		t.Fatalf("job %s never ran", hog)
	}
	return c, cli, hog
}

func jobByID(t *testing.T, c slurm.Client, id string) slurm.Job {
	t.Helper()
	jobs, err := c.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %s is not in squeue", id)
	return slurm.Job{}
}

// TestAgainstRealSlurm runs the advisor and autopilot against Slurm 22.05:
// jobs read with their limits and GPUs, advice appended to AdminComment,
// a pending job's limit lowered and restored, a node parked and woken
// through the site's programs, a restarted runner picking up its state.
func TestAgainstRealSlurm(t *testing.T) {
	c, cli, run := fullCluster(t)
	ctx := context.Background()
	pend := c.Sbatch(t, "-J", "pend", "-t", "120", "--gres=gpu:2", "--comment", "x", "--wrap", "true")
	c.Run(t, "scontrol", "update", "JobId="+pend, "AdminComment=site note")
	small := c.Sbatch(t, "-J", "small", "-t", "3", "--gres=gpu:1", "--wrap", "true")

	// 1. Read: limits, GPUs, states.
	j := jobByID(t, cli, pend)
	if !j.Pending() || j.TimeLimit != 2*time.Hour || j.GPUs != 2 || j.Partition != slurmtest.Partition || j.Account != slurmtest.Account {
		t.Fatalf("pending job read as %+v", j)
	}
	if r := jobByID(t, cli, run); r.GPUs != 4 || r.Start.IsZero() || r.TimeLimit != time.Hour {
		t.Fatalf("running job read as %+v", r)
	}
	nodes, err := cli.Nodes(ctx)
	if err != nil || len(nodes) != 1 || nodes[0].GPUs != slurmtest.GPUs || nodes[0].GPUsUsed != 4 {
		t.Fatalf("nodes: %+v, %v", nodes, err)
	}

	// 2. Advisor: the comment is appended, the limit left alone.
	dir := t.TempDir()
	est := &fixedEstimator{}
	r := &slurm.Runner{Client: cli, Estimator: est, Dir: dir, Config: slurm.Config{Comment: true}}
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	j = jobByID(t, cli, pend)
	if !strings.HasPrefix(j.AdminComment, "site note [prescient: limit 5m run~2m start~") || j.TimeLimit != 2*time.Hour {
		t.Fatalf("after advice: comment %q, limit %s", j.AdminComment, j.TimeLimit)
	}
	if est.learned != 1 {
		t.Fatalf("accounting heard %d times, want 1", est.learned)
	}
	adv := r.Advice()
	if len(adv) != 2 || adv[0].Start.IsZero() || adv[0].Start.Before(time.Now()) {
		t.Fatalf("advice: %+v", adv)
	}

	// 3. Autopilot lowers the pending job in its partition (not the one
	// already under five minutes); a restarted runner restores it when
	// autopilot is turned off. One runner holds the state at a time.
	auto := slurm.Config{Comment: true, Autopilot: true, Partitions: []string{slurmtest.Partition}, Floor: time.Minute}
	restart := func(cfg slurm.Config) {
		t.Helper()
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		r = &slurm.Runner{Client: cli, Estimator: est, Dir: dir, Config: cfg}
		if err := r.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	restart(auto)
	if got := jobByID(t, cli, pend).TimeLimit; got != 5*time.Minute {
		t.Fatalf("autopilot: limit %s, want 5m", got)
	}
	if got := jobByID(t, cli, small).TimeLimit; got != 3*time.Minute {
		t.Fatalf("autopilot raised or touched a 3m limit: %s", got)
	}
	other := &slurm.Runner{Client: cli, Estimator: est, Dir: dir}
	if err := other.Cycle(ctx); !errors.Is(err, slurm.ErrLocked) {
		t.Fatalf("a second runner on the same state: %v, want ErrLocked", err)
	}
	restart(slurm.Config{Comment: true})
	if got := jobByID(t, cli, pend).TimeLimit; got != 2*time.Hour {
		t.Fatalf("autopilot off: limit %s, want the user's 2h back", got)
	}

	// Lowered again; the watchdog leaves a running Prescient alone, and one
	// gone (killed: its lock let go) only once it has been gone long enough.
	restart(auto)
	watchdog := &slurm.Runner{Client: cli, Dir: dir}
	if done, err := watchdog.RestoreIfStale(ctx, 0); done || err != nil {
		t.Fatalf("watchdog with Prescient running: %v %v", done, err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if done, err := watchdog.RestoreIfStale(ctx, time.Hour); done || err != nil {
		t.Fatalf("watchdog, Prescient gone a moment: %v %v", done, err)
	}
	if got := jobByID(t, cli, pend).TimeLimit; got != 5*time.Minute {
		t.Fatalf("the watchdog restored early: limit %s", got)
	}
	if done, err := watchdog.RestoreIfStale(ctx, 0); !done || err != nil {
		t.Fatalf("watchdog, Prescient gone: %v %v", done, err)
	}
	if got := jobByID(t, cli, pend).TimeLimit; got != 2*time.Hour {
		t.Fatalf("after the watchdog: limit %s, want 2h", got)
	}

	// Lowered again, then Stop restores.
	r = &slurm.Runner{Client: cli, Estimator: est, Dir: dir, Config: auto}
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := jobByID(t, cli, pend).TimeLimit; got != 2*time.Hour {
		t.Fatalf("after stop: limit %s, want 2h", got)
	}
	events, err := os.ReadFile(dir + "/events.jsonl")
	if err != nil || strings.Count(string(events), `"kind":"lower"`) != 3 || strings.Count(string(events), `"kind":"restore"`) != 3 ||
		strings.Count(string(events), `"user_limit_ns":7200000000000`) != 3 { // each lower names the user's 2h
		t.Fatalf("events: %s %v", events, err)
	}

	// 4. Parking: with the queue empty and the node idle, it is powered
	// down through SuspendProgram; turning autopilot off powers it up
	// through ResumeProgram. (A job that pends for it is woken for by
	// Slurm itself as well as by Decide; TestDecide covers Decide's.)
	c.Run(t, "scancel", "--user=root")
	if err := c.WaitNode(t, "idle", 90*time.Second); err != nil {
		t.Fatalf("%v; squeue: %s; node: %s", err, c.Run(t, "squeue", "-o", "%i %T %r %N"), c.Run(t, "sinfo", "--json"))
	}
	park := auto
	park.ParkIdleAfter = time.Second
	r = &slurm.Runner{Client: cli, Estimator: est, Dir: dir, Config: park}
	t.Cleanup(func() { r.Close() })
	for range 2 { // the first sees it idle, the second parks it
		if err := r.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	if err := c.WaitNode(t, "idle~", 30*time.Second); err != nil {
		t.Fatalf("not parked: %v", err)
	}
	if _, ok := r.State().Parked[slurmtest.Node]; !ok {
		t.Fatalf("state has no parked node: %+v", r.State())
	}
	// Autopilot off: the node it parked is powered up.
	restart(slurm.Config{Comment: true})
	if err := c.WaitNode(t, "idle", 40*time.Second); err != nil {
		t.Fatalf("not woken: %v", err)
	}
	b, _ := os.ReadFile(c.PowerLog)
	if !strings.Contains(string(b), "suspend "+slurmtest.Node) || !strings.Contains(string(b), "resume "+slurmtest.Node) {
		t.Fatalf("power log: %q", b)
	}
	events, _ = os.ReadFile(dir + "/events.jsonl")
	if !strings.Contains(string(events), `"kind":"power_down"`) || !strings.Contains(string(events), `"kind":"power_up"`) {
		t.Fatalf("events: %s", events)
	}
	// The three jobs ended (cancelled) within the hour a new runner reads.
	if est.mostJobs < 3 {
		t.Errorf("the accounting read held %d jobs, want the 3 that ended", est.mostJobs)
	}
}

func waitFor(f func() bool) error {
	for range 100 {
		if f() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return os.ErrDeadlineExceeded
}

// When slurmctld goes away, a cycle fails and changes nothing, Stop cannot
// restore and keeps what it could not undo, and once slurmctld is back the
// users' limits are restored; without slurmdbd, the advice goes on
// (accounting waits).
func TestSlurmDaemonsGoingAway(t *testing.T) {
	c := slurmtest.Start(t)
	ctx := context.Background()
	cli := &slurm.CLI{Conf: c.Conf, Timeout: 10 * time.Second}
	run := c.Sbatch(t, "-J", "runner", "-t", "60", "--gres=gpu:4", "--wrap", "sleep 300")
	if err := waitFor(func() bool { return jobByID(t, cli, run).Running() }); err != nil {
		t.Fatalf("job %s never ran", run)
	}
	pend := c.Sbatch(t, "-J", "pend", "-t", "120", "--gres=gpu:2", "--wrap", "true")
	dir := t.TempDir()
	est := &fixedEstimator{}
	auto := slurm.Config{Autopilot: true, Partitions: []string{slurmtest.Partition}, Floor: time.Minute}
	r := &slurm.Runner{Client: cli, Estimator: est, Dir: dir, Config: auto}
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if got := jobByID(t, cli, pend).TimeLimit; got != 5*time.Minute {
		t.Fatalf("lowered to %s, want 5m", got)
	}

	c.StopDaemon(t, "slurmctld")
	if err := r.Cycle(ctx); err == nil {
		t.Fatal("a cycle without slurmctld succeeded")
	}
	if err := r.Stop(ctx); err == nil {
		t.Fatal("Stop without slurmctld reported success")
	}
	r.Close()
	r = &slurm.Runner{Client: cli, Estimator: est, Dir: dir}
	if st := r.State(); len(st.Lowered) != 0 {
		t.Fatalf("a runner not yet loaded has state %+v", st)
	}
	c.StartDaemon(t, "slurmctld")
	if got := jobByID(t, cli, pend); got.TimeLimit != 5*time.Minute || !got.Pending() {
		t.Fatalf("after slurmctld's restart: %+v", got)
	}
	if err := r.Cycle(ctx); err != nil { // autopilot off: restores what the state kept
		t.Fatal(err)
	}
	if got := jobByID(t, cli, pend).TimeLimit; got != 2*time.Hour {
		t.Fatalf("after slurmctld came back: limit %s, want 2h", got)
	}

	c.StopDaemon(t, "slurmdbd")
	learned := est.learned
	r.Config = slurm.Config{Comment: true}
	if err := r.Cycle(ctx); err != nil {
		t.Fatalf("a cycle without slurmdbd: %v", err)
	}
	if est.learned != learned {
		t.Errorf("accounting heard without slurmdbd")
	}
	if j := jobByID(t, cli, pend); !strings.Contains(j.AdminComment, "[prescient:") {
		t.Errorf("no advice without slurmdbd: %q", j.AdminComment)
	}
	r.Close()
}

// countingClient counts the Update calls it passes on.
type countingClient struct {
	slurm.Client
	updates int
}

func (c *countingClient) Update(ctx context.Context, ids []string, u slurm.Update) error {
	c.updates++
	return c.Client.Update(ctx, ids, u)
}

// limitEstimator takes each job's own limit for its estimate.
type limitEstimator struct{}

func (limitEstimator) Estimate(_ context.Context, jobs []slurm.Job) (map[string]slurm.Estimate, error) {
	out := map[string]slurm.Estimate{}
	for _, j := range jobs {
		out[j.ID] = slurm.Estimate{RunP50: j.TimeLimit / 2, Limit: j.TimeLimit, Source: "limit"}
	}
	return out, nil
}

func (limitEstimator) Learn(context.Context, []byte) error { return nil }

// TestOrderingThroughNiceOnRealSlurm: a 10-minute job that came after a
// 10-hour one starts first once autopilot orders the partition, on top
// of its user's Nice, which each job's first Nice marks in its
// AdminComment in the same scontrol call; a cycle with nothing new
// changes nothing. A Prescient that lost its state folder gives every
// job its user's Nice back from the marks alone, and takes them off.
func TestOrderingThroughNiceOnRealSlurm(t *testing.T) {
	c, cli, run := fullCluster(t)
	ctx := context.Background()
	long := c.Sbatch(t, "-J", "long", "-t", "600", "--gres=gpu:4", "--wrap", "sleep 300")
	time.Sleep(2 * time.Second) // a point is 0.864 s of age here: long's priority is higher
	short := c.Sbatch(t, "-J", "short", "-t", "10", "--nice=5", "--gres=gpu:4", "--wrap", "sleep 300")
	long2 := c.Sbatch(t, "-J", "long2", "-t", "600", "--gres=gpu:4", "--wrap", "sleep 300")
	if l, s := jobByID(t, cli, long), jobByID(t, cli, short); l.Priority <= s.Priority || s.Nice != 5 {
		t.Fatalf("before: long's priority %d, short's %d (nice %d); want long first", l.Priority, s.Priority, s.Nice)
	}

	prio, err := cli.Priority(ctx)
	if err != nil || prio.Ages() != nil {
		t.Fatalf("priority settings %+v: %v", prio, err)
	}
	counted := &countingClient{Client: cli}
	r := &slurm.Runner{Client: counted, Estimator: limitEstimator{}, Dir: t.TempDir(),
		Config: slurm.Config{Autopilot: true, Order: []string{slurmtest.Partition}}}
	t.Cleanup(func() { r.Close() })
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if counted.updates != 3 {
		t.Errorf("%d scontrol updates, want 3: each job's first Nice with its mark", counted.updates)
	}
	l, s, l2 := jobByID(t, cli, long), jobByID(t, cli, short), jobByID(t, cli, long2)
	if s.Priority <= l.Priority || s.Nice != 5+prio.HeadStartNice(10*time.Minute) || l.Nice != prio.HeadStartNice(10*time.Hour) ||
		l2.Nice != l.Nice {
		t.Fatalf("ordered: long's priority %d (nice %d), short's %d (nice %d), long2's nice %d; want short first",
			l.Priority, l.Nice, s.Priority, s.Nice, l2.Nice)
	}
	// Slurm itself starts the short one when the GPUs come free.
	c.Run(t, "scancel", run)
	if err := waitFor(func() bool { return jobByID(t, cli, short).Running() }); err != nil {
		t.Fatalf("short never ran: %s", c.Run(t, "squeue", "-o", "%i %j %T %Q %y %r"))
	}
	if !jobByID(t, cli, long).Pending() {
		t.Fatal("long started before short")
	}
	counted.updates = 0
	if err := r.Cycle(ctx); err != nil || counted.updates != 0 {
		t.Fatalf("a second cycle: %d updates, %v", counted.updates, err)
	}
	for id, user := range map[string]int{long: 0, short: 5, long2: 0} {
		if n, ok := slurm.MarkedNice(jobByID(t, cli, id).AdminComment); !ok || n != user {
			t.Errorf("job %s: comment %q, want its user's Nice %d marked", id, jobByID(t, cli, id).AdminComment, user)
		}
	}
	// The host goes with its state folder: a new one reads the marks.
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	lost := &slurm.Runner{Client: cli, Estimator: limitEstimator{}, Dir: t.TempDir(),
		Config: slurm.Config{Autopilot: true, Order: []string{slurmtest.Partition}}}
	if err := lost.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for id, user := range map[string]int{long: 0, short: 5, long2: 0} {
		j := jobByID(t, cli, id)
		if _, marked := slurm.MarkedNice(j.AdminComment); j.Nice != user || marked {
			t.Errorf("after a Stop with a lost state: job %s has Nice %d and comment %q; want %d, no mark", id, j.Nice, j.AdminComment, user)
		}
	}
}

// TestHoldingForCleanerPowerOnRealSlurm: a deferrable job is held while
// cleaner power is ahead, does not start when GPUs come free, and starts
// once released when the grid has turned clean.
func TestHoldingForCleanerPowerOnRealSlurm(t *testing.T) {
	c, cli, hog := fullCluster(t)
	ctx := context.Background()
	flex := c.Sbatch(t, "-J", "flex", "-t", "10", "--gres=gpu:1", "--wrap", "sleep 300")

	now := time.Now()
	dirty, _ := sim.NewCarbonSeries([]time.Time{now.Add(-time.Hour), now.Add(time.Hour)}, []float64{500, 100})
	clean, _ := sim.NewCarbonSeries([]time.Time{now.Add(-time.Hour)}, []float64{100})
	grid := executor.Carbon(dirty)
	holder, err := executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, 6*time.Hour, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	qos := jobByID(t, cli, flex).QOS
	r := &slurm.Runner{Client: cli, Estimator: limitEstimator{}, Dir: t.TempDir(),
		Config: slurm.Config{Autopilot: true, HoldQOS: []string{qos}, Holder: holder},
		Carbon: func(context.Context) (executor.Carbon, error) { return grid, nil }}
	t.Cleanup(func() { r.Close() })
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if j := jobByID(t, cli, flex); j.Reason != "JobHeldAdmin" {
		t.Fatalf("QOS %s job not held: %+v", qos, j)
	}
	if adv := r.Advice(); len(adv) != 1 || !adv[0].StartAfter.Equal(now.Add(time.Hour)) || !strings.HasPrefix(adv[0].Reason, "held by Prescient") {
		t.Errorf("advice on the held job: %+v", adv)
	}
	if until, ok := slurm.MarkedHold(jobByID(t, cli, flex).AdminComment); !ok || !until.Equal(now.Add(time.Hour).Truncate(time.Second)) {
		t.Errorf("the hold's mark: %s %v", until, ok)
	}
	// The cleaner power moves an hour later: the held job's mark follows
	// (held again, which Slurm takes).
	later, _ := sim.NewCarbonSeries([]time.Time{now.Add(-time.Hour), now.Add(2 * time.Hour)}, []float64{500, 100})
	grid = later
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	j := jobByID(t, cli, flex)
	if until, ok := slurm.MarkedHold(j.AdminComment); !ok || !until.Equal(now.Add(2*time.Hour).Truncate(time.Second)) || j.Reason != "JobHeldAdmin" {
		t.Errorf("after the end moved: %q, %s", j.AdminComment, j.Reason)
	}
	c.Run(t, "scancel", hog)
	time.Sleep(3 * time.Second)
	if j := jobByID(t, cli, flex); !j.Pending() {
		t.Fatalf("held job started: %+v", j)
	}
	grid = clean
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(func() bool { return jobByID(t, cli, flex).Running() }); err != nil {
		t.Fatalf("released job never ran: %s", c.Run(t, "squeue", "-o", "%i %j %T %r"))
	}
	if st := r.State(); len(st.Held) != 0 {
		t.Errorf("state still holds %v", st.Held)
	}
	if j := jobByID(t, cli, flex); strings.Contains(j.AdminComment, "prescient-held-until") {
		t.Errorf("the mark outlived the hold: %q", j.AdminComment)
	}
}

// TestGuardReleasesHoldsOnRealSlurm: Prescient holds a deferrable job and
// goes away, its state with it. The guard, reading Slurm alone, leaves
// the hold while its marked end is less than GuardHoldGrace past, then
// releases it and takes the mark off.
func TestGuardReleasesHoldsOnRealSlurm(t *testing.T) {
	c, cli, _ := fullCluster(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	flex := c.Sbatch(t, "-J", "flex", "-t", "10", "--gres=gpu:1", "--wrap", "sleep 300")
	now := time.Now()
	dirty, _ := sim.NewCarbonSeries([]time.Time{now.Add(-time.Hour), now.Add(time.Hour)}, []float64{500, 100})
	holder, err := executor.NewCarbonHold([]cluster.Tier{cluster.TierOpportunistic}, 6*time.Hour, 0.2)
	if err != nil {
		t.Fatal(err)
	}
	r := &slurm.Runner{Client: cli, Estimator: limitEstimator{}, Dir: t.TempDir(), Log: quiet,
		Config: slurm.Config{Autopilot: true, HoldQOS: []string{jobByID(t, cli, flex).QOS}, Holder: holder},
		Carbon: func(context.Context) (executor.Carbon, error) { return executor.Carbon(dirty), nil }}
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil { // gone, releasing nothing
		t.Fatal(err)
	}
	if j := jobByID(t, cli, flex); j.Reason != "JobHeldAdmin" {
		t.Fatalf("not held: %+v", j)
	}
	end := now.Add(time.Hour)
	if done, err := slurm.RunGuard(ctx, cli, end.Add(slurm.GuardHoldGrace-time.Minute), quiet); len(done) != 0 || err != nil {
		t.Fatalf("guard within the grace: %+v %v", done, err)
	}
	done, err := slurm.RunGuard(ctx, cli, end.Add(slurm.GuardHoldGrace+time.Minute), quiet)
	if err != nil || len(done) != 1 || done[0].Kind != slurm.ActRelease {
		t.Fatalf("guard past the grace: %+v %v", done, err)
	}
	if j := jobByID(t, cli, flex); j.Held() || strings.Contains(j.AdminComment, "prescient-held-until") {
		t.Fatalf("after the guard: %+v", j)
	}
}

// minuteEstimator recommends a one-minute limit for every job.
type minuteEstimator struct{}

func (minuteEstimator) Estimate(_ context.Context, jobs []slurm.Job) (map[string]slurm.Estimate, error) {
	out := map[string]slurm.Estimate{}
	for _, j := range jobs {
		out[j.ID] = slurm.Estimate{RunP50: 30 * time.Second, Limit: time.Minute, Source: "fixed"}
	}
	return out, nil
}

func (minuteEstimator) Learn(context.Context, []byte) error { return nil }

// TestGuardOnRealSlurm: autopilot lowers a pending job's two hours to a
// minute and marks the two hours in its AdminComment; Prescient then goes
// away without restoring anything, its state with it. Once the job runs,
// the guard, reading Slurm alone, gives it the two hours back before the
// minute kills it; while it pended the guard did nothing.
func TestGuardOnRealSlurm(t *testing.T) {
	c, cli, hog := fullCluster(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	job := c.Sbatch(t, "-J", "lowered", "-t", "120", "--gres=gpu:1", "--wrap", "sleep 300")
	r := &slurm.Runner{Client: cli, Estimator: minuteEstimator{}, Dir: t.TempDir(), Log: quiet,
		Config: slurm.Config{Autopilot: true, Partitions: []string{slurmtest.Partition}, Floor: time.Minute}}
	if err := r.Cycle(ctx); err != nil {
		t.Fatal(err)
	}
	j := jobByID(t, cli, job)
	if j.TimeLimit != time.Minute || !strings.Contains(j.AdminComment, "[prescient-user-limit: 120m]") {
		t.Fatalf("lowered: limit %s, comment %q", j.TimeLimit, j.AdminComment)
	}
	if err := r.Close(); err != nil { // gone, restoring nothing
		t.Fatal(err)
	}
	if done, err := slurm.RunGuard(ctx, cli, time.Now(), quiet); len(done) != 0 || err != nil {
		t.Fatalf("guard while it pends: %+v %v", done, err)
	}
	c.Run(t, "scancel", hog)
	if err := waitFor(func() bool { return jobByID(t, cli, job).Running() }); err != nil {
		t.Fatalf("job %s never ran: %s", job, c.Run(t, "squeue", "-o", "%i %T %r %l"))
	}
	done, err := slurm.RunGuard(ctx, cli, time.Now(), quiet)
	if err != nil || len(done) != 1 || done[0].Job != job {
		t.Fatalf("guard once it runs: %+v %v", done, err)
	}
	if j := jobByID(t, cli, job); !j.Running() || j.TimeLimit != 2*time.Hour {
		t.Fatalf("after the guard: %s with limit %s, want running with 2h", j.State, j.TimeLimit)
	}
}
