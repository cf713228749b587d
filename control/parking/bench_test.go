package parking

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/policies"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// BenchmarkParkingDecision10kGPUs is a cycle's parking decision on 1,250
// nodes of 8 GPUs at its costliest: 1,000 nodes run an 8-GPU job each, 100
// of them being stopped, 200 nodes are parked and 20 more waking, 30 are
// awake and empty, and 500 8-GPU jobs wait. The waiting jobs are planned
// in all three stages (the GPUs being freed, the waking nodes, the parked
// nodes: the planner three times over what is left of the queue), the
// parked nodes are woken (recorded in the store) and the forecast's
// outlook is weighed for the empty nodes. Each iteration starts from the
// same parked nodes.
func BenchmarkParkingDecision10kGPUs(b *testing.B) {
	ctx := context.Background()
	var nodes []cluster.Node
	for i := range 1250 {
		nodes = append(nodes, clustertest.Node(fmt.Sprintf("n%d", i)).GPUs(8, "A100-80GB").Obj())
	}
	fleet := clustertest.Fleet(nodes...)
	now := time.Date(2026, 6, 1, 14, 0, 0, 0, time.UTC)
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "prescient.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	pol, err := policies.New("prescient", policies.Options{})
	if err != nil {
		b.Fatal(err)
	}
	planner, err := executor.New(pol)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	var background sync.WaitGroup
	p := New(&Config{IdleAfter: time.Hour, Forecast: true}, Deps{Store: st, Nodes: service.StaticFleet{Fleet: fleet},
		Planner: planner, Advice: advice.New(st, nil, log),
		Mode: func() service.Mode { return service.ModeAutopilot }, Inference: func(*cluster.Node) bool { return false },
		ArrivalRate: func(time.Time) float64 { return 0 }, Changed: func() {}, Poke: func() {}, Background: &background,
		Clock: func() time.Time { return now }, Log: log})
	lv := &live.State{Now: now, Nodes: slices.Clone(fleet.Nodes), Placements: map[cluster.JobID]store.Placement{}}
	parked := map[string]*parkedNode{}
	for n := 1000; n < 1220; n++ {
		state := park.Parked
		if n >= 1200 {
			state = park.Waking
		}
		parked[lv.Nodes[n].Name] = &parkedNode{Record: park.Record{State: state, Since: now.Add(-time.Minute), SeenDown: true}, node: fleet.Nodes[n]}
		lv.Nodes[n].State = cluster.NodeFailed // off
	}
	lv.Snap = cluster.NewSnapshot(&cluster.Fleet{Nodes: lv.Nodes, Tenants: fleet.Tenants}, now)
	lv.In = executor.PlanInput{Now: now, Cluster: lv.Snap}
	for i := range 1500 {
		p50 := time.Duration(1+i%10) * time.Hour
		j := cluster.Job{ID: cluster.JobID(fmt.Sprintf("j%04d", i)), Spec: cluster.JobSpec{Tenant: "t1", Tier: cluster.TierStandard, GPUs: 8, GPUMilli: cluster.MilliGPU},
			SubmitTime: now.Add(-time.Hour), State: cluster.StateQueued}
		v := &executor.JobView{Job: &j, Forecast: executor.Forecast{Job: j.ID, DurationP50: p50, DurationP90: p50 + time.Hour}, QueuedSince: j.SubmitTime}
		if i >= 1000 {
			lv.Queued = append(lv.Queued, j)
			lv.In.Queue = append(lv.In.Queue, v)
			continue
		}
		j.State, j.StartTime = cluster.StateRunning, now.Add(-30*time.Minute)
		var allocs []cluster.Allocation
		for g := range 8 {
			allocs = append(allocs, cluster.Allocation{GPU: cluster.GPURef{Node: lv.Nodes[i].Name, Index: g}, Milli: cluster.MilliGPU})
		}
		if err := lv.Snap.Allocate(j.ID, allocs); err != nil {
			b.Fatal(err)
		}
		lv.Placements[j.ID] = store.Placement{Job: j.ID, Attempt: 1, Allocations: allocs}
		v.Progress = 30 * time.Minute
		lv.In.Running = append(lv.In.Running, &executor.RunningJob{JobView: *v, Allocations: allocs, Started: j.StartTime, Stopping: i < 100})
	}
	var ds []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		p.mu.Lock()
		p.parked = map[string]*parkedNode{}
		for name, pn := range parked {
			cp := *pn
			p.parked[name] = &cp
		}
		p.mu.Unlock()
		start := time.Now()
		p.Decide(ctx, lv, executor.Plan{})
		ds = append(ds, time.Since(start))
		p.mu.Lock()
		got := p.parked["n1000"].State
		p.mu.Unlock()
		if got != park.Waking {
			b.Fatalf("n1000 %s after the decision, want waking", got)
		}
	}
	slices.Sort(ds)
	q := func(f float64) float64 {
		return float64(ds[min(int(f*float64(len(ds))), len(ds)-1)].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
}
