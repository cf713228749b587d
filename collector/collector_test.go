package collector_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
)

var update = flag.Bool("update", false, "rewrite golden files")

func newSimCollector(t testing.TB, node cluster.Node) (*collector.Collector, *nvml.Sim, *collector.Metrics) {
	t.Helper()
	sim, err := nvml.NewSim(nvml.SimOptions{Node: node, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	m := collector.NewMetrics(nil)
	c, err := collector.New(collector.Config{Hosts: []collector.HostSource{{Node: "node-1", Host: sim}}, Jobs: sim, Interval: 1e9, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	return c, sim, m
}

func TestSampleOnceReadsEveryGPUAndNamesTheJobOfEachProcess(t *testing.T) {
	c, sim, m := newSimCollector(t, cluster.Node{})
	uuid := sim.UUIDs()[5]
	if err := sim.Assign(uuid, nvml.Assignment{JobID: "train-1", Util: 0.8, MemBytes: 20 << 30, PIDs: []int{4242}}); err != nil {
		t.Fatal(err)
	}
	got := c.SampleOnce(t0)
	if len(got) != 8 {
		t.Fatalf("%d samples; want 8", len(got))
	}
	s := got[5]
	if s.UUID != uuid || s.Node != "node-1" || len(s.Processes) != 1 || s.Processes[0].JobID != "train-1" || s.Processes[0].MemUsedBytes != 20<<30 {
		t.Errorf("sample of the GPU running train-1: %+v", s)
	}
	if n := metricValue(m.Samples); n != 8 {
		t.Errorf("samples_total = %v; want 8", n)
	}
}

func TestAFailingCallIsCountedPerDeviceAndTheOthersGoOn(t *testing.T) {
	c, sim, m := newSimCollector(t, cluster.Node{})
	bad := sim.UUIDs()[1]
	_ = sim.FailCall(bad, "temperature", true)
	_ = sim.FailCall(bad, "processes", true)
	got := c.SampleOnce(t0)
	if len(got) != 8 {
		t.Fatalf("%d samples; want all 8", len(got))
	}
	if got[1].Has(nvml.FieldTemperature) || !got[1].Has(nvml.FieldPower) {
		t.Errorf("the failing GPU's sample: missing bits %b; want temperature only", got[1].Missing)
	}
	for _, kind := range []string{"temperature", "processes"} {
		if n := metricValue(m.Errors.WithLabelValues(bad, kind)); n != 1 {
			t.Errorf("errors_total{device=%s,kind=%s} = %v; want 1", bad, kind, n)
		}
	}
	if n := metricValue(m.Errors.WithLabelValues(sim.UUIDs()[0], "temperature")); n != 0 {
		t.Errorf("a healthy GPU counted %v errors", n)
	}
}

func TestMIGDevicesAreSampledBesideTheirGPU(t *testing.T) {
	g := cluster.NewGPU(0, "A100-SXM4-80GB")
	g.MIGEnabled = true
	c, _, _ := newSimCollector(t, cluster.Node{GPUs: []cluster.GPU{g}})
	got := c.SampleOnce(t0)
	if len(got) != 3 || got[0].MIG || !got[1].MIG || !got[2].MIG || got[1].ParentUUID != got[0].UUID {
		t.Fatalf("samples: %+v", got)
	}
	lp, _ := collector.AppendLineProtocol(nil, got[1:2])
	if !bytes.Contains(lp, []byte("parent_uuid="+got[0].UUID)) || !bytes.Contains(lp, []byte("mem_used_bytes=")) || bytes.Contains(lp, []byte("power_w")) {
		t.Errorf("MIG line: %s", lp)
	}
}

// The line protocol of the gpu and gpu_process measurements is what
// operators query: a golden file pins it.
func TestLineProtocolGolden(t *testing.T) {
	s := samples("GPU-5b1a", t0, 2)
	s[1].Missing = nvml.FieldPower | nvml.FieldXID
	s[1].Processes[0].JobID = ""
	s[1].Model = "NVIDIA A100 with, odd=name"
	s[0].Processes[0].LabelTags = map[string]string{"experiment": "exp 7", "pipeline": "p=1"}
	s[0].Processes[0].LabelFields = map[string]string{"run id": `r"42\`, "note": "two\nlines"}
	got, n := collector.AppendLineProtocol(nil, s)
	if n != 2 {
		t.Errorf("%d gpu lines; want 2", n)
	}
	golden := filepath.Join("testdata", "samples.lp.golden")
	if *update {
		os.WriteFile(golden, got, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("line protocol:\n%s\nwant:\n%s", got, want)
	}
}

// labelledJobs names the job of the sim's processes and knows its labels.
type labelledJobs struct {
	collector.JobRegistry
	labels map[string]map[string]string
}

func (l labelledJobs) LabelsOfJob(job string) map[string]string { return l.labels[job] }

// A job's labels travel with its processes: the allow-listed keys as tags,
// the others as fields; a registry that knows no labels adds none.
func TestProcessesCarryTheirJobsLabels(t *testing.T) {
	sim, err := nvml.NewSim(nvml.SimOptions{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	jobs := collector.JobRegistries{labelledJobs{JobRegistry: sim, labels: map[string]map[string]string{
		"train-1": {"experiment": "e7", "run": "r42", "empty": ""}}}}
	c, err := collector.New(collector.Config{Hosts: []collector.HostSource{{Node: "node-1", Host: sim}}, Jobs: jobs,
		TagLabels: []string{"experiment", "pipeline"}, Interval: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	uuids := sim.UUIDs()
	_ = sim.Assign(uuids[0], nvml.Assignment{JobID: "train-1", Util: 0.8, MemBytes: 1 << 30, PIDs: []int{4242}})
	_ = sim.Assign(uuids[1], nvml.Assignment{JobID: "other", Util: 0.8, MemBytes: 1 << 30, PIDs: []int{4343}})
	got := c.SampleOnce(t0)
	p := got[0].Processes[0]
	if p.LabelTags["experiment"] != "e7" || p.LabelFields["run"] != "r42" || len(p.LabelTags) != 1 || len(p.LabelFields) != 1 {
		t.Errorf("train-1's process: tags %v, fields %v; want experiment as a tag, run as a field, no empty label", p.LabelTags, p.LabelFields)
	}
	if q := got[1].Processes[0]; q.LabelTags != nil || q.LabelFields != nil {
		t.Errorf("a job without labels got tags %v, fields %v", q.LabelTags, q.LabelFields)
	}
}
