package control

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/cluster/clustertest"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/lending"
	"github.com/prescient-sched/prescient/control/parking"
	"github.com/prescient-sched/prescient/executor/lend"
)

// A plane started on the store the version before the architecture
// change wrote (store/testdata/upgrade-8b61c04) recovers all of it: its
// jobs and placements, the parked and waking nodes with their states, and
// the loans.
func TestAPlaneRecoversAStoreTheVersionBeforeWrote(t *testing.T) {
	b, err := os.ReadFile("../store/testdata/upgrade-8b61c04/prescient.db")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prescient.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	fleet := clustertest.Fleet(clustertest.Node("n0").GPUs(4, "A100-80GB").Obj(), clustertest.Node("n1").GPUs(4, "A100-80GB").Obj(),
		clustertest.Node("inf-0").GPUs(4, "A100-80GB").Obj(), clustertest.Node("inf-1").GPUs(4, "A100-80GB").Obj())
	for i := 2; i < 4; i++ {
		fleet.Nodes[i].Labels = map[string]string{cluster.PoolLabel: "inference"}
	}
	e := &env{t: t, ctx: context.Background(), clock: &fakeClock{now: t0}, path: path, backend: newFakeBackend(), fleet: fleet,
		mod: func(c *Config) {
			c.Telemetry = collector.NewEmbeddedSink(c.Store)
			c.Parking = &parking.Config{IdleAfter: time.Hour}
			c.Lending = &lending.Config{Pools: []string{"inference"}, Recent: lend.DefaultRecent}
		}}
	e.open()
	fs, err := e.plane.Fleet(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, n := range fs.Nodes {
		got[n.Name] = n.State
		if n.Loan != nil {
			got[n.Name] += "/" + n.Loan.State
		}
	}
	want := map[string]string{"n0": "ready", "n1": "ready", "n2": "parked", "n3": "waking", "inf-0": "ready/lent", "inf-1": "ready/returning"}
	for n, s := range want {
		if got[n] != s {
			t.Errorf("%s %q, want %q (all: %v)", n, got[n], s, got)
		}
	}
	if fs.Running != 2 || fs.Queued != 1 {
		t.Errorf("%d running, %d queued; want 2 and 1", fs.Running, fs.Queued)
	}
	if boot := e.plane.parking.BootTime(); boot != 4*time.Minute {
		t.Errorf("boot time %s, want the 4m the store kept", boot)
	}
	st, err := e.plane.Job(e.ctx, "queued-1")
	if err != nil || st.Forecast == nil || st.Forecast.DurationP90S != 7200 {
		t.Errorf("queued-1 %+v (%v): want its stored forecast", st.Forecast, err)
	}
}
