package lending

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/models/idle"
)

// t0 is when the tests' clocks start.
var t0 = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

// testLending is lending of the pool "inference" on the reactive rule.
func testLending() *Lending {
	return New(&Config{Pools: []string{"inference"}, Recent: lend.DefaultRecent}, Deps{Log: slog.New(slog.DiscardHandler)})
}

// decideEnv is lending and its pool of two inference nodes, inf-0 and
// inf-1, of 4 GPUs each, for decideLoans on grids made up by the test.
func decideEnv(t *testing.T) (*Lending, *loanPool) {
	lp := &loanPool{name: "inference"}
	for _, n := range []string{"inf-0", "inf-1"} {
		var us []string
		for g := range 4 {
			us = append(us, fmt.Sprintf("GPU-%s-%d", n, g))
		}
		lp.nodes, lp.gpus, lp.uuids = append(lp.nodes, n), append(lp.gpus, 4), append(lp.uuids, us)
		lp.load, lp.down = append(lp.load, 0), append(lp.down, false)
	}
	return testLending(), lp
}

// utilGrids are the idleness grids at now of the GPUs of lp's nodes: busy
// reports whether GPU g of node k is busy at minute m ago.
func utilGrids(lp *loanPool, now time.Time, busy func(k, g, ago int) bool) map[string]idle.Grid {
	n := int(telemetry.History / telemetry.Step)
	out := map[string]idle.Grid{}
	for k := range lp.nodes {
		for g, u := range lp.uuids[k] {
			gr := idle.Grid{ID: u, Start: now.Add(-time.Duration(n-1) * time.Minute), Step: time.Minute, Idle: make([]float64, n)}
			for m := range gr.Idle {
				if !busy(k, g, n-1-m) {
					gr.Idle[m] = 1
				}
			}
			out[u] = gr
		}
	}
	return out
}

func TestALoanDecisionReadsLentMinutesAsTrainingsAndKeepsNodesThatServe(t *testing.T) {
	p, lp := decideEnv(t)
	now := t0.Add(5 * time.Hour)
	decide := func(grids map[string]idle.Grid) decision {
		t.Helper()
		d, ok := p.decideLoans(now, nil, lp, grids, true)
		if !ok {
			t.Fatal("no decision")
		}
		return d
	}

	// inf-1 was lent an hour ago and came back 2 minutes ago: its GPUs
	// were busy with training meanwhile, and the last sample stands for a
	// few minutes more. None of that is inference demand: both nodes are
	// idle to the service, and inf-1 may go again.
	p.loans["inf-1"] = (*nodeLoan)(nil).moved("inference", lend.Lent, now.Add(-time.Hour)).moved("inference", lend.Serving, now.Add(-2*time.Minute))
	d := decide(utilGrids(lp, now, func(k, _, ago int) bool { return k == 1 && ago <= 62 && ago >= 0 }))
	if d.busy != 0 || len(d.takeBack) != 0 || fmt.Sprint(d.lend) != "[1]" {
		t.Errorf("busy %g, take back %v, lend %v; want no demand and inf-1 lent again", d.busy, d.takeBack, d.lend)
	}

	// The service's demand that ran on inf-1 before its loan is still
	// demand: 3 GPUs busy until the loan, on inf-0 since.
	p.loans["inf-1"] = (*nodeLoan)(nil).moved("inference", lend.Lent, now.Add(-10*time.Minute))
	d = decide(utilGrids(lp, now, func(k, g, ago int) bool { return g < 3 && (k == 1) == (ago > 10) }))
	if d.busy != 3 || d.loan != 4 || len(d.takeBack) != 0 || len(d.lend) != 0 {
		t.Errorf("busy %g, idle for a loan %g, take back %v, lend %v; want 3 busy, 4 idle (8 less 3 and the headroom), nothing to do",
			d.busy, d.loan, d.takeBack, d.lend)
	}
	delete(p.loans, "inf-1")

	// A node whose own GPUs served within the last 30 minutes stays, even
	// the last: the other goes.
	d = decide(utilGrids(lp, now, func(k, g, ago int) bool { return k == 1 && g == 0 && ago == 20 }))
	if fmt.Sprint(d.lend) != "[0]" {
		t.Errorf("lend %v, want inf-0: inf-1 served 20 minutes ago", d.lend)
	}

	// inf-1 was lent from 40 to 25 minutes ago and again 5 minutes ago:
	// neither loan is demand, so the pool has 7 GPUs to spare (8 less the
	// headroom) and keeps inf-1 lent.
	p.loans["inf-1"] = (*nodeLoan)(nil).moved("inference", lend.Lent, now.Add(-40*time.Minute)).
		moved("inference", lend.Returning, now.Add(-25*time.Minute)).moved("inference", lend.Serving, now.Add(-25*time.Minute)).
		moved("inference", lend.Lent, now.Add(-5*time.Minute))
	d = decide(utilGrids(lp, now, func(k, _, ago int) bool { return k == 1 && (ago <= 5 || ago > 20 && ago <= 40) }))
	if d.busy != 0 || d.loan != 7 || len(d.takeBack) != 0 {
		t.Errorf("busy %g, idle for a loan %g, take back %v; want no demand, 7, inf-1 kept lent", d.busy, d.loan, d.takeBack)
	}
	delete(p.loans, "inf-1")

	// A failed node serves nothing: with inf-0 down, lending the idle
	// inf-1 would leave the service no GPU.
	lp.down[0] = true
	d = decide(utilGrids(lp, now, func(int, int, int) bool { return false }))
	if len(d.lend) != 0 || d.loan != 3 {
		t.Errorf("lend %v, idle for a loan %g; want nothing lent, 3 idle (inf-1's 4 less the headroom)", d.lend, d.loan)
	}
}

// A lent node that fails stays lent (it gives the service nothing back),
// and its GPUs do not make a healthy lent node go back.
func TestAFailedLentNodeDoesNotTakeAnotherBack(t *testing.T) {
	p, _ := decideEnv(t)
	lp := &loanPool{name: "inference", nodes: []string{"inf-0", "inf-1", "inf-2"}, gpus: []int{4, 4, 4}, load: []int{0, 4000, 4000}, down: []bool{false, false, true}}
	for _, n := range lp.nodes {
		lp.uuids = append(lp.uuids, []string{n + "-0", n + "-1", n + "-2", n + "-3"})
	}
	now := t0.Add(5 * time.Hour)
	for _, n := range lp.nodes[1:] {
		p.loans[n] = (*nodeLoan)(nil).moved("inference", lend.Lent, now.Add(-3*time.Hour))
	}
	// inf-0 serves on one GPU; inf-2's GPUs are not seen.
	grids := utilGrids(lp, now, func(k, g, _ int) bool { return k == 0 && g == 0 })
	for _, u := range lp.uuids[2] {
		delete(grids, u)
	}
	d, ok := p.decideLoans(now, nil, lp, grids, true)
	if !ok || len(d.takeBack) != 0 || len(d.lend) != 0 || d.busy != 1 || d.keep != 10 {
		t.Errorf("take back %v, lend %v, busy %g, idle kept %g; want nothing to do, 1 busy, 10 idle kept (12 less the busy one and the headroom)",
			d.takeBack, d.lend, d.busy, d.keep)
	}
}

// BenchmarkLoanDecision10kGPUs is one lending decision (decideLoans, run
// each minute beside the plan loop) on an inference pool of 1,250 nodes
// of 8 GPUs with every GPU's last 4 hours read: a quarter of the nodes
// lent, their minutes on loan masked, the demand per minute, the reactive
// lender's forecast and lend.Policy.Decide. The idle model's cost, when
// one is served, is models/idle.BenchmarkForecast10kGPUs's.
func BenchmarkLoanDecision10kGPUs(b *testing.B) {
	lp := &loanPool{name: "inference"}
	for n := range 1250 {
		var us []string
		for g := range 8 {
			us = append(us, fmt.Sprintf("GPU-%d-%d", n, g))
		}
		lp.nodes, lp.gpus, lp.uuids = append(lp.nodes, fmt.Sprintf("n%d", n)), append(lp.gpus, 8), append(lp.uuids, us)
		lp.load, lp.down = append(lp.load, 0), append(lp.down, false)
	}
	p := testLending()
	now := t0.Add(6 * time.Hour)
	for n := 1000; n < 1250; n++ {
		p.loans[lp.nodes[n]] = (*nodeLoan)(nil).moved("inference", lend.Lent, now.Add(-time.Hour))
	}
	// Half the serving nodes' GPUs busy in waves of an hour.
	grids := utilGrids(lp, now, func(k, g, ago int) bool { return k < 500 && (ago/60+g)%2 == 0 })
	b.ReportAllocs()
	for b.Loop() {
		d, ok := p.decideLoans(now, nil, lp, grids, true)
		if !ok || d.serving != 8000 {
			b.Fatalf("decision %v, %g GPUs serving", ok, d.serving)
		}
	}
}
