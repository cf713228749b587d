package cluster_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
)

func TestTheExampleTenantsFileReads(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "examples", "tenants.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ts, err := cluster.ReadTenantsFile(f, "tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 4 {
		t.Fatalf("%d tenants, want 4", len(ts))
	}
	v, l, i, o := ts[0], ts[1], ts[2], ts[3]
	if v.Weight != 2 || v.Cohort != "research" || v.Quota[0].GPUs != 40 || *v.Quota[0].BorrowingLimit != 40 || v.MaxRunningJobs != 200 {
		t.Errorf("vision: %+v", v)
	}
	if *l.Quota[0].LendingLimit != 30 || l.Quota[0].BorrowingLimit != nil || l.Reclaim != cluster.ReclaimLowerTier || v.Reclaim != "" {
		t.Errorf("language: %+v", l)
	}
	if i.Weight != 1 || !i.AllowsTier(cluster.TierBatch) || i.AllowsTier(cluster.TierProduction) {
		t.Errorf("interns: %+v", i)
	}
	if q, ok := o.QuotaFor("H100-SXM5-80GB"); !ok || q.GPUs != 8 {
		t.Errorf("ops: H100 quota %v %v", q, ok)
	}
	if _, ok := o.QuotaFor("A100-SXM4-80GB"); ok {
		t.Error("ops may use A100s, which it has no quota of")
	}
}

func TestTenantsFileErrorsSayWhere(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown key", "tenants:\n  - name: a\n    quotta: 3\n", []string{"t.yaml", "line 3", "quotta"}},
		{"duplicate name", "tenants:\n  - name: a\n  - name: b\n  - name: a\n", []string{"t.yaml:4", "tenants[2]", "tenants[0] already"}},
		{"lending above nominal", "tenants:\n  - name: a\n    quota: [{gpus: 4, lending_limit: 5}]\n", []string{"t.yaml:2", "lending_limit"}},
		{"negative borrowing", "tenants:\n  - name: a\n  - name: b\n    quota: [{gpus: 4, borrowing_limit: -1}]\n", []string{"t.yaml:3", "tenants[1]", "borrowing_limit"}},
		{"two quotas of a model", "tenants:\n  - name: a\n    quota: [{model: X, gpus: 1}, {model: X, gpus: 2}]\n", []string{"t.yaml:2", "quota[1]", "X"}},
		{"quota without gpus", "tenants:\n  - name: a\n    quota: [{model: X}]\n", []string{"quota[0].gpus: missing"}},
		{"both forms", "tenants:\n  - name: a\n    quota_gpus: 2\n    quota: [{gpus: 2}]\n", []string{"quota_gpus and quota"}},
		{"unknown tier", "tenants:\n  - name: a\n    tiers: [urgent]\n", []string{"t.yaml:2", "tiers[0]", "urgent"}},
		{"negative running cap", "tenants:\n  - name: a\n    max_running_jobs: -1\n", []string{"max_running_jobs"}},
		{"unknown reclaim", "tenants:\n  - name: a\n  - name: b\n    reclaim: sometimes\n", []string{"t.yaml:3", "tenants[1]", "reclaim", "sometimes"}},
		{"NaN weight", "tenants:\n  - name: a\n    weight: .nan\n", []string{"weight"}},
		{"no name", "tenants:\n  - weight: 2\n", []string{"name: missing"}},
		{"none", "tenants: []\n", []string{"none listed"}},
		{"empty", "", []string{"empty"}},
		{"not YAML", "tenants: [\n", []string{"t.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cluster.ReadTenantsFile(strings.NewReader(tt.yaml), "t.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func FuzzReadTenantsFile(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("..", "examples", "tenants.yaml")); err == nil {
		f.Add(string(b))
	}
	f.Add("tenants:\n  - {name: a, quota_gpus: 3, tiers: [batch]}\n")
	f.Add("tenants:\n  - {name: a, cohort: c, quota: [{model: X, gpus: 2, lending_limit: 1, borrowing_limit: 0}]}\n")
	f.Add("tenants:\n  - {name: a, cohort: c, quota_gpus: 2, reclaim: never}\n  - {name: b, cohort: c, reclaim: lower_tier}\n")
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := cluster.ReadTenantsFile(strings.NewReader(s), "fuzz.yaml")
		if err != nil {
			return
		}
		// What it accepts is what a fleet accepts.
		fl := cluster.Fleet{Tenants: ts}
		if err := fl.Validate(); err != nil {
			t.Fatalf("accepted tenants a fleet refuses: %v", err)
		}
	})
}
