package datasets

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func TestReadSWF(t *testing.T) {
	res, err := readSWF(strings.NewReader(string(readTestdata(t, "swf_small.swf"))), "swf_small.swf", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 5 || res.Skipped != 0 || len(res.Missing) != 0 {
		t.Fatalf("got %d jobs, %d skipped, missing %q", len(res.Jobs), res.Skipped, res.Missing)
	}
	start := time.Unix(1296571124, 0).UTC()
	byID := map[cluster.JobID]cluster.Job{}
	for _, j := range res.Jobs {
		byID[j.ID] = j
	}

	j := byID["1"]
	if j.State != cluster.StateSucceeded || j.Attempts != 1 || !j.SubmitTime.Equal(start) ||
		!j.StartTime.Equal(start.Add(10*time.Second)) || !j.EndTime.Equal(start.Add(110*time.Second)) ||
		j.Outcome.RunTime != 100*time.Second {
		t.Errorf("job 1: %+v", j)
	}
	if s := j.Spec; s.GPUs != 16 || s.GPUMilli != cluster.MilliGPU || s.TimeLimit != 10*time.Minute ||
		s.User != "user-3" || s.Tenant != "group-7" || s.Labels[LabelPartition] != "batch" || len(s.Labels) != 2 {
		t.Errorf("job 1 spec: %+v", s)
	}

	// Cancelled in the queue: no processors were allocated, so the
	// requested ones count, and it never started.
	j = byID["2"]
	if j.State != cluster.StateCancelled || j.Attempts != 0 || !j.StartTime.IsZero() ||
		!j.EndTime.Equal(start.Add(30*time.Second)) || j.Spec.GPUs != 32 || j.Spec.Labels[LabelQueue] != "normal" ||
		j.Spec.Labels[LabelSWFPrefix+"status"] != "5" {
		t.Errorf("job 2: %+v", j)
	}

	// Failed, with every optional field known; partition 9 has no name.
	j = byID["3"]
	if j.State != cluster.StateFailed || j.Spec.Name != "app-12" || j.Spec.Labels[LabelPartition] != "9" ||
		j.Spec.Labels[LabelSWFPrefix+"avg_cpu_time_s"] != "2950.5" || j.Spec.Labels[LabelSWFPrefix+"used_memory_kb"] != "2048" ||
		j.Spec.Labels[LabelSWFPrefix+"requested_memory_kb"] != "4096" || j.Outcome.RunTime != 3000*time.Second {
		t.Errorf("job 3: %+v", j)
	}

	// Unknown status, wait and run, no group: the user is the tenant.
	j = byID["4"]
	if j.State != cluster.StateSucceeded || !j.StartTime.IsZero() || !j.EndTime.IsZero() || j.Spec.Tenant != "user-5" ||
		j.Spec.Labels[LabelSWFPrefix+"preceding_job"] != "2" || j.Spec.Labels[LabelSWFPrefix+"think_time_s"] != "30" {
		t.Errorf("job 4: %+v", j)
	}

	// Cancelled after it started; no time limit.
	j = byID["5"]
	if j.State != cluster.StateCancelled || j.Attempts != 1 || j.Outcome.RunTime != 50*time.Second || j.Spec.TimeLimit != 0 || j.Spec.GPUs != 1 {
		t.Errorf("job 5: %+v", j)
	}
}

func TestReadSWFErrors(t *testing.T) {
	const head = "; UnixStartTime: 1000\n"
	const good = "1 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"too few fields", head + "1 0 0 10\n", "x.swf:2: 4 fields, want 18"},
		{"too many fields", head + strings.TrimSpace(good) + " 7\n", "x.swf:2: more than 18 fields"},
		{"not a number", head + strings.Replace(good, " 10 ", " ten ", 1), `x.swf:2: field run_time: "ten": not a number`},
		{"fraction", head + strings.Replace(good, " 10 ", " 10.5 ", 1), `x.swf:2: field run_time: "10.5": not an integer`},
		{"negative", head + strings.Replace(good, " 60 ", " -60 ", 1), `x.swf:2: field requested_time: "-60": negative (only -1 means unknown)`},
		{"no submit time", head + "1 -1 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n", `x.swf:2: field submit_time: "-1": unknown (-1)`},
		{"bad status", head + strings.Replace(good, " 1 1 1 -1", " 7 1 1 -1", 1), `x.swf:2: field status: "7": not an SWF status`},
		{"duplicate", head + good + good, `x.swf:3: field job_number: "1": duplicate job id: first on line 2`},
		{"bad start", "; UnixStartTime: soon\n" + good, `x.swf:1: header UnixStartTime: "soon"`},
		{"late start", good + head, "x.swf:2: header UnixStartTime after the first job"},
		{"huge", head + strings.Replace(good, " 10 ", " 99999999999999999999 ", 1), `field run_time: "99999999999999999999": is too large (over 1576800000)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readSWF(strings.NewReader(tc.text), "x.swf", ReadOptions{})
			var pe *ParseError
			if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a ParseError containing %q", err, tc.want)
			}
			// Leniently, the good line before the bad one is kept.
			res, err := readSWF(strings.NewReader(tc.text), "x.swf", ReadOptions{Lenient: true})
			if err != nil || res.Skipped != 1 {
				t.Fatalf("lenient: %v, %d skipped", err, res.Skipped)
			}
		})
	}
}

func TestReadSWFWithoutStartTime(t *testing.T) {
	epoch := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	res, err := readSWF(strings.NewReader("1 3600 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"), "x.swf", ReadOptions{Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Jobs[0].SubmitTime.Equal(epoch.Add(time.Hour)) || len(res.Missing) != 1 || !strings.Contains(res.Missing[0], "UnixStartTime") {
		t.Fatalf("submit %s, missing %q", res.Jobs[0].SubmitTime, res.Missing)
	}
}

func TestSWFFleet(t *testing.T) {
	f, err := ReadFleet("swf:testdata/swf_small.swf")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Nodes) != 4 || len(f.Nodes[0].GPUs) != 16 || f.Nodes[3].Name != "node-0004" || f.Nodes[0].GPUs[0].Model != SWFProcessorModel {
		t.Fatalf("fleet %s: %d nodes, %d processors each", f.Name, len(f.Nodes), len(f.Nodes[0].GPUs))
	}
	p := writeTemp(t, []byte("; MaxNodes: 4\n1 0 0 10 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"), "x.swf")
	if _, err := ReadFleet("swf:" + p); err == nil || !strings.Contains(err.Error(), "no MaxProcs") {
		t.Fatalf("got %v, want an error for the missing MaxProcs", err)
	}
}

// TestReadSharedSWF reads both shared logs whole: the job counts their
// README gives, every job with a time limit.
func TestReadSharedSWF(t *testing.T) {
	for _, tc := range []struct {
		file  string
		jobs  int
		nodes int
	}{
		{"CEA-Curie-2011-2.1-cln.first75.swf.gz", 234619, 5544},
		{"KTH-SP2-1996-2.1-cln.swf.gz", 28476, 100},
	} {
		path := sharedDataset(t, "swf", tc.file)
		res, err := ReadTrace("swf:"+path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		limited := 0
		for i := range res.Jobs {
			if res.Jobs[i].Spec.TimeLimit > 0 {
				limited++
			}
		}
		if len(res.Jobs) != tc.jobs || limited < tc.jobs*99/100 {
			t.Errorf("%s: %d jobs (%d with a time limit), want %d", tc.file, len(res.Jobs), limited, tc.jobs)
		}
		f, err := ReadFleet("swf:" + path)
		if err != nil || len(f.Nodes) != tc.nodes {
			t.Errorf("%s: fleet %v, err %v", tc.file, f, err)
		}
	}
}

func BenchmarkReadSWFCurie(b *testing.B) {
	path := sharedDataset(b, "swf", "CEA-Curie-2011-2.1-cln.first75.swf.gz")
	for b.Loop() {
		if _, err := ReadTrace("swf:"+path, ReadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
