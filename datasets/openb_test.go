package datasets

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestReadOpenbRealTrace(t *testing.T) {
	res, err := ReadTrace("openb:"+sharedDataset(t, "alibaba-openb", "openb_pod_list_default.csv"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(res.Jobs); got != 8152 {
		t.Fatalf("read %d jobs, want 8,152", got)
	}
	assertSortedValid(t, res.Jobs)
	states := map[cluster.JobState]int{}
	fractional, cpuOnly := 0, 0
	for _, j := range res.Jobs {
		states[j.State]++
		if j.Spec.Fractional() {
			fractional++
		}
		if j.Spec.GPUs == 0 {
			cpuOnly++
		}
	}
	// Pod phases Running 5193, Failed 1870, Pending 897, Succeeded 192.
	want := map[cluster.JobState]int{cluster.StateRunning: 5193, cluster.StateFailed: 1870, cluster.StateQueued: 897, cluster.StateSucceeded: 192}
	if !reflect.DeepEqual(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
	if fractional != 3078 || cpuOnly != 1088 {
		t.Errorf("%d fractional and %d CPU-only jobs, want 3,078 and 1,088 (SOURCE.txt)", fractional, cpuOnly)
	}
	if first := res.Jobs[0]; first.ID != "openb-pod-0000" || !first.SubmitTime.Equal(DefaultOpenbEpoch()) {
		t.Errorf("first job %s at %v, want openb-pod-0000 at the epoch", first.ID, first.SubmitTime)
	}
}

func TestReadOpenbFixture(t *testing.T) {
	epoch := time.Date(2020, 3, 1, 0, 0, 0, 0, time.UTC)
	res, err := readOpenb(strings.NewReader(string(readTestdata(t, "openb_small.csv"))), "openb_small.csv", ReadOptions{Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[cluster.JobID]cluster.Job{}
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}
	at := func(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }
	spec := func(cpu, mib int64, gpus, milli int, qos string, models ...string) cluster.JobSpec {
		return cluster.JobSpec{Tenant: OpenbTenant, Tier: cluster.DefaultTier, CPUMilli: cpu, MemoryBytes: mib << 20,
			GPUs: gpus, GPUMilli: milli, GPUModels: models, Labels: map[string]string{cluster.LabelQoS: qos}}
	}
	tests := []struct {
		name string
		want cluster.Job
	}{
		{"a running fractional pod runs from its scheduled time, run time observed so far", cluster.Job{
			ID: "openb-pod-0001", Spec: spec(6000, 12288, 1, 460, "LS"), SubmitTime: at(427061), State: cluster.StateRunning,
			Attempts: 1, StartTime: at(427061), Outcome: cluster.Outcome{RunTime: (12902960 - 427061) * time.Second}}},
		{"a pending pod is queued with no start", cluster.Job{
			ID: "openb-pod-0061", Spec: spec(11908, 47104, 1, 1000, "BE"), SubmitTime: at(10001278), State: cluster.StateQueued}},
		{"a CPU-only pod has no GPUs and no share", cluster.Job{
			ID: "openb-pod-0100", Spec: spec(4000, 8192, 0, 0, "Burstable"), SubmitTime: at(500), State: cluster.StateSucceeded,
			Attempts: 1, StartTime: at(600), EndTime: at(1500), Outcome: cluster.Outcome{RunTime: 900 * time.Second}}},
		{"a failed pod keeps its GPU models and ends at deletion", cluster.Job{
			ID: "openb-pod-0101", Spec: spec(32000, 65536, 8, 1000, "Guaranteed", "V100M16", "V100M32"), SubmitTime: at(1000),
			State: cluster.StateFailed, Attempts: 1, StartTime: at(1200), EndTime: at(4600), Outcome: cluster.Outcome{RunTime: 3400 * time.Second}}},
		{"GPU models are trimmed and times may be fractional", cluster.Job{
			ID: "openb-pod-0102", Spec: spec(8000, 30720, 2, 1000, "BE", "A10", "T4"), SubmitTime: at(1000), State: cluster.StateSucceeded,
			Attempts: 1, StartTime: at(1000), EndTime: at(2000.5), Outcome: cluster.Outcome{RunTime: 1000500 * time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Spec.Name = string(tt.want.ID)
			if got := byID[tt.want.ID]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
	assertSortedValid(t, res.Jobs)
}

func TestOpenbDefaultEpochIsDocumentedDate(t *testing.T) {
	if got := DefaultOpenbEpoch(); !got.Equal(time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("DefaultOpenbEpoch() = %v", got)
	}
}

const openbHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
const openbGoodRow = "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"

func TestOpenbBadRows(t *testing.T) {
	tests := []struct {
		name, row, field string
		cause            error
	}{
		{"a share over a whole GPU is rejected", "p1,1,1,1,1500,,LS,Running,0,10,0", "gpu_milli", errTooLarge},
		{"a share of a GPU on a multi-GPU pod is rejected", "p1,1,1,2,500,,LS,Running,0,10,0", "gpu_milli", nil},
		{"a share on a CPU-only pod is rejected", "p1,1,1,0,100,,LS,Running,0,10,0", "gpu_milli", nil},
		{"no share on a GPU pod is rejected", "p1,1,1,1,0,,LS,Running,0,10,0", "gpu_milli", nil},
		{"a negative memory request is rejected", "p1,1,-1,1,1000,,LS,Running,0,10,0", "memory_mib", errNegative},
		{"a GPU count over 100000 is rejected", "p1,1,1,100001,1000,,LS,Running,0,10,0", "num_gpu", errTooLarge},
		{"an unknown phase is rejected", "p1,1,1,1,1000,,LS,Evicted,0,10,0", "pod_phase", errUnknownValue},
		{"a negative creation time is rejected", "p1,1,1,1,1000,,LS,Running,-5,10,0", "creation_time", errNegative},
		{"a NaN creation time is rejected", "p1,1,1,1,1000,,LS,Running,NaN,10,0", "creation_time", errNotFinite},
		{"scheduling before creation is rejected", "p1,1,1,1,1000,,LS,Running,5,10,0", "scheduled_time", nil},
		{"deletion before scheduling is rejected", "p1,1,1,1,1000,,LS,Succeeded,0,10,20", "deletion_time", nil},
		{"a running pod must have been scheduled", "p1,1,1,1,1000,,LS,Running,0,10,", "scheduled_time", errEmpty},
		{"a pending pod must not have been scheduled", "p1,1,1,1,1000,,LS,Pending,0,10,5", "scheduled_time", nil},
		{"an empty name is rejected", ",1,1,1,1000,,LS,Running,0,10,0", "name", errEmpty},
		{"a repeated name is rejected", "openb-pod-0000,1,1,1,1000,,LS,Running,0,10,0", "id", errDuplicateID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := openbHeader + openbGoodRow + tt.row + "\n" + strings.Replace(openbGoodRow, "0000", "0009", 1)
			assertBadRow(t, readOpenb, data, tt.field, tt.cause, 2)
		})
	}
}

// A list with only the five request columns, made from the default one,
// gives the same requests, pending at the epoch, and says what it lacks.
func TestReadOpenbFiveColumnList(t *testing.T) {
	full, err := ReadTrace("openb:"+sharedDataset(t, "alibaba-openb", "openb_pod_list_default.csv"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(full.Missing) != 0 || full.Untimed {
		t.Errorf("the default list: missing %v, untimed %v", full.Missing, full.Untimed)
	}
	var b strings.Builder
	b.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n")
	byName := map[string]cluster.JobSpec{}
	for _, j := range full.Jobs {
		s := j.Spec
		fmt.Fprintf(&b, "%s,%d,%d,%d,%d\n", j.ID, s.CPUMilli, s.MemoryBytes>>20, s.GPUs, s.GPUMilli)
		byName[string(j.ID)] = s
	}
	five, err := readOpenb(strings.NewReader(b.String()), "five.csv", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(five.Jobs) != len(full.Jobs) || !five.Untimed || len(five.Missing) != 3 {
		t.Fatalf("%d jobs (want %d), untimed %v, missing %q", len(five.Jobs), len(full.Jobs), five.Untimed, five.Missing)
	}
	assertSortedValid(t, five.Jobs)
	for _, j := range five.Jobs {
		want := byName[string(j.ID)]
		want.GPUModels, want.Labels = nil, nil
		if !reflect.DeepEqual(j.Spec, want) || j.State != cluster.StateQueued || !j.SubmitTime.Equal(DefaultOpenbEpoch()) {
			t.Fatalf("job %s: %+v (%s at %s), want %+v pending at the epoch", j.ID, j.Spec, j.State, j.SubmitTime, want)
		}
	}
	// Some of a pod's life and not the rest is refused, naming both.
	_, err = readOpenb(strings.NewReader("name,cpu_milli,memory_mib,num_gpu,gpu_milli,pod_phase,creation_time\np,1,1,1,1000,Running,0\n"), "half.csv", ReadOptions{})
	if err == nil || !strings.Contains(err.Error(), "creation_time") || !strings.Contains(err.Error(), "scheduled_time") {
		t.Errorf("half a life: %v", err)
	}
}
