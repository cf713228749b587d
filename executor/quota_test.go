package executor_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/executortest"
)

// cohort is three tenants sharing 10 GPUs 4/4/2, borrowing what the others
// leave idle; b may borrow at most 2 beyond its 4.
func cohort() []cluster.Tenant {
	two := 2
	return []cluster.Tenant{
		{Name: "a", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 4}}},
		{Name: "b", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 4, BorrowingLimit: &two}}},
		{Name: "c", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 2}}},
	}
}

func quotaScenario(t *testing.T) *executortest.Scenario {
	s := executortest.NewScenario(t, "fifo").At(epoch)
	s.Nodes(node("n1", 8), node("n2", 2))
	s.Tenants(cohort()...)
	return s
}

func TestATenantBorrowsWhatItsCohortLeavesIdle(t *testing.T) {
	s := quotaScenario(t)
	for i := range 9 {
		s.Queued(clustertest.Job("a" + string(rune('0'+i))).GPUs(1).Tenant("a").Submitted(epoch.Add(time.Duration(i) * time.Second)).Obj())
	}
	p := s.Plan()
	// a's 4, then 6 more borrowed from b's and c's idle quota: 10 in all,
	// so the ninth... every one of the 9 fits in the 10 the cohort lends.
	if got := len(executortest.Placed(p)); got != 9 {
		t.Errorf("placed %d of a's 9 one-GPU jobs, want 9 (borrowing b's and c's idle quota)", got)
	}
}

func TestBorrowingStopsAtTheBorrowingLimit(t *testing.T) {
	s := quotaScenario(t)
	for i := range 8 {
		s.Queued(clustertest.Job("b" + string(rune('0'+i))).GPUs(1).Tenant("b").Submitted(epoch.Add(time.Duration(i) * time.Second)).Obj())
	}
	p := s.Plan()
	if got := len(executortest.Placed(p)); got != 6 {
		t.Errorf("placed %d of b's jobs, want 6 (quota 4 + borrowing limit 2)", got)
	}
	if !waitsFor(p, "b6", "borrowing limit") {
		t.Errorf("b6 waits for %q, want its borrowing limit named", waitReason(p, "b6"))
	}
}

func TestALenderTakesItsQuotaBackFromBorrowers(t *testing.T) {
	s := quotaScenario(t)
	// a holds all 10 GPUs, 6 of them borrowed; c submits 2 jobs within its
	// nominal 2, and b one.
	for i := range 8 {
		s.Running(clustertest.Job("a"+string(rune('0'+i))).GPUs(1).Tenant("a").Obj()).On("n1", i).For(time.Duration(i+1) * time.Minute)
	}
	s.Running(clustertest.Job("a8").GPUs(2).Tenant("a").Obj()).On("n2", 0, 1).For(time.Hour)
	s.Queued(clustertest.Job("c0").GPUs(2).Tenant("c").Submitted(epoch.Add(-time.Minute)).Obj())
	s.Queued(clustertest.Job("b0").GPUs(1).Tenant("b").Submitted(epoch.Add(-time.Second)).Obj())
	p := s.Plan()
	victims := executortest.Preempted(p)
	if len(victims) != 3 {
		t.Fatalf("preempted %v, want three of a's jobs: two for c0's 2 GPUs, one for b0", victims)
	}
	for _, v := range victims {
		if !strings.HasPrefix(string(v), "a") {
			t.Errorf("preempted %s, which is not a borrower's", v)
		}
	}
	// The cheapest to stop go first: a0 and a1 ran least.
	if !slices.Contains(victims, "a0") || !slices.Contains(victims, "a1") {
		t.Errorf("victims %v; want the jobs that lose least (a0, a1) among them", victims)
	}
	for _, pr := range p.Preemptions {
		if !strings.Contains(pr.Reason, "quota reclaim") {
			t.Errorf("preemption of %s: reason %q, want it to say it reclaims quota", pr.Job, pr.Reason)
		}
	}
}

func TestNoReclaimBeyondTheNominalQuota(t *testing.T) {
	s := quotaScenario(t)
	// c already holds its 2; a third GPU would be borrowing, not reclaiming.
	s.Running(clustertest.Job("c0").GPUs(2).Tenant("c").Obj()).On("n2", 0, 1).For(time.Hour)
	for i := range 8 {
		s.Running(clustertest.Job("a"+string(rune('0'+i))).GPUs(1).Tenant("a").Obj()).On("n1", i).For(time.Minute)
	}
	s.Queued(clustertest.Job("c1").GPUs(1).Tenant("c").Obj())
	if p := s.Plan(); len(p.Preemptions) != 0 {
		t.Errorf("preempted %v for a job beyond its tenant's nominal quota", executortest.Preempted(p))
	}
}

func TestTiersAndRunningJobsGateATenant(t *testing.T) {
	s := executortest.NewScenario(t, "fifo").At(epoch)
	s.Nodes(node("n1", 8))
	s.Tenants(cluster.Tenant{Name: "a", Weight: 1, Tiers: []cluster.Tier{cluster.TierBatch}, MaxRunningJobs: 2})
	s.Running(clustertest.Job("r0").GPUs(1).Tenant("a").Tier(cluster.TierBatch).Obj()).On("n1", 0).For(time.Minute)
	s.Queued(clustertest.Job("prod").GPUs(1).Tenant("a").Tier(cluster.TierProduction).Submitted(epoch.Add(-time.Minute)).Obj())
	s.Queued(clustertest.Job("q1").GPUs(1).Tenant("a").Tier(cluster.TierBatch).Submitted(epoch.Add(-time.Second)).Obj())
	s.Queued(clustertest.Job("q2").GPUs(1).Tenant("a").Tier(cluster.TierBatch).Obj())
	p := s.Plan()
	if got := executortest.Placed(p); !slices.Equal(got, []cluster.JobID{"q1"}) {
		t.Errorf("placed %v, want [q1] (prod's tier is not a's; q2 would be a's third running job)", got)
	}
	if !waitsFor(p, "prod", "may not use tier production") || !waitsFor(p, "q2", "runs 2 jobs") {
		t.Errorf("reasons: prod %q, q2 %q", waitReason(p, "prod"), waitReason(p, "q2"))
	}
}

func TestQuotaByModelKeepsJobsOnTheirFlavours(t *testing.T) {
	s := executortest.NewScenario(t, "fifo").At(epoch)
	s.Nodes(clustertest.Node("h").GPUs(4, "H100").Obj(), clustertest.Node("v").GPUs(4, "V100").Obj())
	s.Tenants(cluster.Tenant{Name: "a", Weight: 1, Quota: []cluster.Quota{{Model: "H100", GPUs: 1}, {GPUs: 2}}})
	for i := range 4 {
		s.Queued(clustertest.Job("j" + string(rune('0'+i))).GPUs(1).Tenant("a").Submitted(epoch.Add(time.Duration(i) * time.Second)).Obj())
	}
	p := s.Plan()
	per := map[string]int{}
	for _, pl := range p.Placements {
		per[pl.Allocations[0].GPU.Node]++
	}
	if per["h"] > 1 || per["v"] > 2 || len(p.Placements) != 3 {
		t.Errorf("placed %v by node, want at most 1 on the H100s and 2 on the V100s, 3 in all", per)
	}
}

// The ledger alone: a stopping job's GPUs count as returned.
func TestQuotasCountNoStoppingJob(t *testing.T) {
	one := func(id string, stopping bool) *executor.RunningJob {
		j := clustertest.Job(id).GPUs(1).Tenant("c").Obj()
		return &executor.RunningJob{JobView: executor.JobView{Job: &j}, Stopping: stopping,
			Allocations: []cluster.Allocation{{Job: j.ID, GPU: cluster.GPURef{Node: "n", Index: 0}, Milli: cluster.MilliGPU}}}
	}
	q := executor.NewQuotas(cohort(), []*executor.RunningJob{one("x", false), one("y", true)}, func(cluster.GPURef) string { return "V100" })
	if got := q.Usage("c")[""]; got != 1 {
		t.Errorf("c holds %d GPUs in the ledger, want 1 (the stopping job not counted)", got)
	}
}

func waitReason(p executor.Plan, id cluster.JobID) string {
	for _, w := range p.Waiting {
		if w.Job == id {
			return w.Reason
		}
	}
	return ""
}

func waitsFor(p executor.Plan, id cluster.JobID, want string) bool {
	return strings.Contains(waitReason(p, id), want)
}

// A job's Nodes (a backend's constraints) keep every placer to them, and
// a job no node may take waits with the backend's reason.
func TestEveryPlacerKeepsAJobToItsAllowedNodes(t *testing.T) {
	for _, policy := range []string{"fifo", "prescient", "tiresias", "easy-backfill"} {
		t.Run(policy, func(t *testing.T) {
			s := executortest.NewScenario(t, policy).At(epoch)
			s.Nodes(node("n1", 8), node("n2", 8), node("n3", 8))
			one := clustertest.Job("one").GPUs(2).Submitted(epoch.Add(-2 * time.Minute)).Obj()
			one.Spec.Nodes = []string{"n3"}
			gang := clustertest.Job("gang").GPUs(8).Gang(2).Submitted(epoch.Add(-time.Minute)).Obj()
			gang.Spec.Nodes = []string{"n2", "n3"}
			s.Queued(one)
			s.Queued(gang)
			nowhere := clustertest.Job("nowhere").GPUs(1).Submitted(epoch).Obj()
			nowhere.Spec.Nodes = []string{}
			s.Queued(nowhere).Unplaceable("0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")
			p := s.Plan()
			for _, pl := range p.Placements {
				for _, a := range pl.Allocations {
					if allowed := map[cluster.JobID][]string{"one": {"n3"}, "gang": {"n2", "n3"}}[pl.Job]; !slices.Contains(allowed, a.GPU.Node) {
						t.Errorf("%s placed on %s, allowed %v", pl.Job, a.GPU.Node, allowed)
					}
				}
			}
			if len(p.Placements) != 2 {
				t.Errorf("placed %v, want one and gang", executortest.Placed(p))
			}
			if !waitsFor(p, "nowhere", "node affinity/selector") {
				t.Errorf("nowhere waits for %q", waitReason(p, "nowhere"))
			}
		})
	}
}

// A gang whose tasks must be apart (JobSpec.TasksApart) takes a node per
// task where, without it, best fit would pack both on one node.
func TestAGangWhoseTasksMustBeApartTakesANodePerTask(t *testing.T) {
	for _, apart := range []bool{false, true} {
		for _, policy := range []string{"prescient", "fifo"} {
			s := executortest.NewScenario(t, policy).At(epoch)
			s.Nodes(node("n1", 8), node("n2", 8), node("n3", 8))
			gang := clustertest.Job("gang").GPUs(4).Gang(2).Submitted(epoch).Obj()
			gang.Spec.TasksApart = apart
			s.Queued(gang)
			p := s.Plan()
			if len(p.Placements) != 1 {
				t.Fatalf("%s, apart %v: placed %v", policy, apart, executortest.Placed(p))
			}
			nodes := map[string]bool{}
			for _, a := range p.Placements[0].Allocations {
				nodes[a.GPU.Node] = true
			}
			if want := map[bool]int{false: 1, true: 2}[apart]; len(nodes) != want {
				t.Errorf("%s, apart %v: the gang's tasks on %v, want %d node(s)", policy, apart, nodes, want)
			}
		}
	}
}

// A gang's tasks go no more to a node than it has room for
// (JobSpec.TasksPerNode): four one-GPU tasks that best fit would pack on
// n1 split 3 and 1 when n1 has room for three.
func TestAGangTakesNoMoreTasksOnANodeThanItHasRoomFor(t *testing.T) {
	for _, room := range []map[string]int{nil, {"n1": 3, "n2": 3, "n3": 3}} {
		for _, policy := range []string{"prescient", "fifo"} {
			s := executortest.NewScenario(t, policy).At(epoch)
			s.Nodes(node("n1", 8), node("n2", 8), node("n3", 8))
			s.Running(clustertest.Job("other").GPUs(4).Obj()).On("n1", 0, 1, 2, 3).For(time.Hour) // n1 is the best fit
			gang := clustertest.Job("gang").GPUs(4).Gang(4).Submitted(epoch).Obj()
			gang.Spec.TasksPerNode = room
			s.Queued(gang)
			p := s.Plan()
			if len(p.Placements) != 1 {
				t.Fatalf("%s, room %v: placed %v", policy, room, executortest.Placed(p))
			}
			per := map[string]int{}
			for _, a := range p.Placements[0].Allocations {
				per[a.GPU.Node]++
			}
			most := 0
			for _, k := range per {
				most = max(most, k)
			}
			if want := map[bool]int{true: 4, false: 3}[room == nil]; most != want {
				t.Errorf("%s, room %v: tasks by node %v, want at most %d on one", policy, room, per, want)
			}
		}
	}
}

// A job's node preferences (JobSpec.NodePreference) steer every kind of
// placement, a whole node's GPUs, a share of one and a gang's tasks, to
// the preferred node over the one packing alone would choose.
func TestEveryPlacementHonoursNodePreferences(t *testing.T) {
	jobs := map[string]cluster.Job{
		"whole": clustertest.Job("whole").GPUs(2).Submitted(epoch).Obj(),
		"share": clustertest.Job("share").Share(300).Submitted(epoch).Obj(),
		"gang":  clustertest.Job("gang").GPUs(4).Gang(2).Submitted(epoch).Obj(),
	}
	for _, policy := range []string{"prescient", "fifo"} { // the prescient placement, first fit
		for name, j := range jobs {
			for _, prefer := range []string{"", "n3"} {
				s := executortest.NewScenario(t, policy).At(epoch)
				s.Nodes(node("n1", 8), node("n2", 8), node("n3", 8))
				if prefer != "" {
					j.Spec.NodePreference = map[string]float64{prefer: 200, "n1": -300}
				}
				s.Queued(j)
				p := s.Plan()
				if len(p.Placements) != 1 {
					t.Fatalf("%s, %s: placed %v", policy, name, executortest.Placed(p))
				}
				on := map[string]bool{}
				for _, a := range p.Placements[0].Allocations {
					on[a.GPU.Node] = true
				}
				if prefer == "" && on["n3"] || prefer != "" && (len(on) != 1 || !on["n3"]) {
					t.Errorf("%s, %s, preferring %q: on %v", policy, name, prefer, on)
				}
			}
		}
	}
}

// A lender's queued jobs hold back the quota they would use only if they
// could start: b is at its cap of one running job, so its queued job
// does not keep a from borrowing b's idle GPUs.
func TestAJobHeldByItsTenantsCapHoldsNoQuotaBack(t *testing.T) {
	for _, capped := range []bool{false, true} {
		s := executortest.NewScenario(t, "fifo").At(epoch)
		s.Nodes(node("n1", 8), node("n2", 8), node("n3", 8))
		b := cluster.Tenant{Name: "b", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 8}}}
		if capped {
			b.MaxRunningJobs = 1
		}
		s.Tenants(cluster.Tenant{Name: "a", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 8}}}, b)
		s.Running(clustertest.Job("b-run").GPUs(1).Tenant("b").Obj()).On("n2", 0).For(time.Hour)
		s.Queued(clustertest.Job("b-wait").GPUs(4).Tenant("b").Submitted(epoch.Add(-time.Hour)).Obj())
		s.Queued(clustertest.Job("a-own").GPUs(8).Tenant("a").Submitted(epoch.Add(-time.Minute)).Obj())
		s.Queued(clustertest.Job("a-borrow").GPUs(4).Tenant("a").Submitted(epoch).Obj())
		p := s.Plan()
		placed := executortest.Placed(p)
		// Uncapped, b-wait starts and the cohort's 16 leave a-borrow out;
		// capped, b-wait cannot start, and a borrows 4 of b's 7 idle GPUs.
		if want := capped; slices.Contains(placed, "a-borrow") != want || slices.Contains(placed, "b-wait") == capped {
			t.Errorf("capped %v: placed %v", capped, placed)
		}
	}
}

// A lender's reclaim policy says which borrowed jobs its job may preempt:
// any (the default: the cheapest to stop), only those of a lower tier, or
// none.
func TestALendersReclaimPolicyChoosesTheBorrowersItPreempts(t *testing.T) {
	for _, tt := range []struct {
		reclaim cluster.Reclaim
		want    []cluster.JobID
	}{
		{"", []cluster.JobID{"a-prod"}}, // it ran least
		{cluster.ReclaimLowerTier, []cluster.JobID{"a-batch"}},
		{cluster.ReclaimNever, nil},
	} {
		s := executortest.NewScenario(t, "fifo").At(epoch)
		s.Nodes(node("n1", 4))
		s.Tenants(cluster.Tenant{Name: "a", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 2}}},
			cluster.Tenant{Name: "b", Weight: 1, Cohort: "lab", Quota: []cluster.Quota{{GPUs: 2}}, Reclaim: tt.reclaim})
		// a holds all 4 GPUs, 2 of them b's: b's standard job needs one back.
		s.Running(clustertest.Job("a-own").GPUs(2).Tenant("a").Tier(cluster.TierProduction).Obj()).On("n1", 0, 1).For(time.Hour)
		s.Running(clustertest.Job("a-batch").GPUs(1).Tenant("a").Tier(cluster.TierBatch).Obj()).On("n1", 2).For(time.Hour)
		s.Running(clustertest.Job("a-prod").GPUs(1).Tenant("a").Tier(cluster.TierProduction).Obj()).On("n1", 3).For(30 * time.Minute)
		s.Queued(clustertest.Job("b0").GPUs(1).Tenant("b").Tier(cluster.TierStandard).Submitted(epoch).Obj())
		p := s.Plan()
		got := executortest.Preempted(p)
		if !slices.Equal(got, tt.want) && len(got)+len(tt.want) > 0 {
			t.Errorf("reclaim %q: preempted %v, want %v", tt.reclaim, got, tt.want)
		}
	}
}
