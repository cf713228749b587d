package collector_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
	"github.com/prescient-sched/prescient/internal/influxtest"
	"github.com/prescient-sched/prescient/store"
)

// jobSamples are 60 one-second samples of two GPUs on one node: job-a
// runs two processes on GPU-0 (their memory adds up) and one on GPU-1;
// job-b one process on GPU-1; a process no registry knew sits on GPU-0.
// job-a holds 3i MiB on GPU-0 at second i (i + 2i) and, until second 20,
// 5i MiB on GPU-1, so its peak (177 MiB at 59 s) is GPU-0's.
func jobSamples() []collector.Sample {
	const mib = 1 << 20
	var out []collector.Sample
	for i := range 60 {
		at := t0.Add(time.Duration(i) * time.Second)
		dev := func(uuid string, idx int) collector.Sample {
			return collector.Sample{Time: at, Node: "node-1",
				DeviceInfo:   nvml.DeviceInfo{UUID: uuid, Index: idx, Model: "NVIDIA A100-SXM4-80GB", MemoryTotalBytes: 80 << 30},
				DeviceSample: nvml.DeviceSample{UtilGPUPct: 50, MemUsedBytes: 1 << 30, MemTotalBytes: 80 << 30, PowerW: 200}}
		}
		g0, g1 := dev("GPU-0", 0), dev("GPU-1", 1)
		g0.Processes = []collector.ProcessSample{
			{PID: 10, JobID: "job-a", MemUsedBytes: uint64(i) * mib},
			{PID: 11, JobID: "job-a", MemUsedBytes: uint64(2*i) * mib},
			{PID: 99, MemUsedBytes: 70 << 30}, // unknown job: never counted
		}
		g1.Processes = []collector.ProcessSample{{PID: 20, JobID: "job-b", MemUsedBytes: uint64(100+i%7) * mib}}
		if i < 20 {
			g1.Processes = append(g1.Processes, collector.ProcessSample{PID: 12, JobID: "job-a", MemUsedBytes: uint64(5*i) * mib})
		}
		out = append(out, g0, g1)
	}
	return out
}

// jobStores are a real InfluxDB (a new bucket named from prefix) and an
// embedded store, both holding jobSamples.
func jobStores(t *testing.T, prefix string) (*collector.InfluxQuery, *collector.EmbeddedSink) {
	t.Helper()
	srv := influxtest.Shared(t)
	ctx := context.Background()
	written := jobSamples()
	o := collector.InfluxOptions{URL: srv.URL, Bucket: newBucket(prefix)}
	sink, err := collector.NewInfluxSink(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	if err := sink.Write(ctx, written); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	emb := collector.NewEmbeddedSink(st)
	if err := emb.Write(ctx, written); err != nil {
		t.Fatal(err)
	}
	iq, err := collector.NewInfluxQuery(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(iq.Close)
	return iq, emb
}

// The peak GPU memory of each job, read back from InfluxDB and from the
// embedded store alike: processes of a job on one GPU add up, the GPU where
// the job holds the most counts, and processes without a job are left out.
func TestJobMemoryReadBackFromInfluxAndEmbedded(t *testing.T) {
	ctx := context.Background()
	iq, emb := jobStores(t, "jobmem")
	const mib = 1 << 20
	for name, js := range map[string]collector.JobMemoryStore{"influxdb": iq, "embedded": emb} {
		t.Run(name, func(t *testing.T) {
			// Every job, one window per 10 s.
			all, err := js.JobMemory(ctx, collector.JobMemoryQuery{Start: t0, End: t0.Add(time.Minute), Step: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 2 || all[0].Job != "job-a" || all[1].Job != "job-b" {
				t.Fatalf("jobs %+v; want job-a and job-b", all)
			}
			a := all[0]
			if len(a.Points) != 6 {
				t.Fatalf("job-a: %d windows, want 6", len(a.Points))
			}
			// Window [10 s, 20 s): GPU-1 holds 5·19 = 95 MiB, GPU-0 3·19 = 57 MiB.
			if p := a.Points[1]; !p.Time.Equal(t0.Add(10*time.Second)) || p.Value != 95*mib {
				t.Errorf("job-a, second window: %v at %s; want %d at %s", p.Value, p.Time, 95*mib, t0.Add(10*time.Second))
			}
			if got, want := a.Peak(), float64(3*59*mib); got != want {
				t.Errorf("job-a peak %v; want %v (GPU-0's two processes at 59 s)", got, want)
			}
			if got, want := all[1].Peak(), float64(106*mib); got != want {
				t.Errorf("job-b peak %v; want %v", got, want)
			}
			// One job, a range that ends before the peak; End is exclusive.
			one, err := js.JobMemory(ctx, collector.JobMemoryQuery{Jobs: []string{"job-a"}, Start: t0, End: t0.Add(30 * time.Second), Step: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if len(one) != 1 || one[0].Job != "job-a" || one[0].Peak() != 95*mib {
				t.Errorf("job-a over the first 30 s: %+v; want one series peaking at 95 MiB", one)
			}
			// Many jobs asked for (filtered after the read from InfluxDB).
			many := []string{"job-b"}
			for i := range 30 {
				many = append(many, fmt.Sprintf("job-y%02d", i))
			}
			got, err := js.JobMemory(ctx, collector.JobMemoryQuery{Jobs: many, Start: t0, End: t0.Add(time.Minute), Step: time.Minute})
			if err != nil || len(got) != 1 || got[0].Job != "job-b" || got[0].Peak() != 106*mib {
				t.Errorf("31 jobs asked for, job-b among them: %+v, %v; want job-b alone", got, err)
			}
			none, err := js.JobMemory(ctx, collector.JobMemoryQuery{Jobs: []string{"job-x"}, Start: t0, End: t0.Add(time.Minute), Step: time.Minute})
			if err != nil || len(none) != 0 {
				t.Errorf("an unknown job: %+v, %v; want no series", none, err)
			}
		})
	}
}

// The GPUs each job's processes ran on, read back from InfluxDB and from
// the embedded store alike: job-a's on both GPUs (on GPU-1 only in its
// first 20 seconds), job-b's on GPU-1; processes without a job are left
// out.
func TestJobGPUsReadBackFromInfluxAndEmbedded(t *testing.T) {
	ctx := context.Background()
	iq, emb := jobStores(t, "jobgpus")
	many := []string{"job-b"}
	for i := range 30 {
		many = append(many, fmt.Sprintf("job-y%02d", i))
	}
	for name, js := range map[string]collector.JobGPUStore{"influxdb": iq, "embedded": emb} {
		t.Run(name, func(t *testing.T) {
			for _, tc := range []struct {
				what string
				q    collector.JobGPUsQuery
				want string
			}{
				{"every job, the whole minute", collector.JobGPUsQuery{Start: t0, End: t0.Add(time.Minute)}, "map[job-a:[GPU-0 GPU-1] job-b:[GPU-1]]"},
				{"job-a after its GPU-1 process ended", collector.JobGPUsQuery{Jobs: []string{"job-a"}, Start: t0.Add(20 * time.Second), End: t0.Add(time.Minute)}, "map[job-a:[GPU-0]]"},
				{"31 jobs, job-b among them", collector.JobGPUsQuery{Jobs: many, Start: t0, End: t0.Add(time.Minute)}, "map[job-b:[GPU-1]]"},
				{"an unknown job", collector.JobGPUsQuery{Jobs: []string{"job-x"}, Start: t0, End: t0.Add(time.Minute)}, "map[]"},
				{"End is exclusive", collector.JobGPUsQuery{Start: t0.Add(-time.Minute), End: t0}, "map[]"},
			} {
				got, err := js.JobGPUs(ctx, tc.q)
				if err != nil || fmt.Sprint(got) != tc.want {
					t.Errorf("%s: %v, %v; want %s", tc.what, got, err, tc.want)
				}
			}
			if _, err := js.JobGPUs(ctx, collector.JobGPUsQuery{Start: t0, End: t0}); err == nil || !strings.Contains(err.Error(), "empty") {
				t.Errorf("an empty range: %v, want an error saying so", err)
			}
		})
	}
}

func TestJobMemoryQueryBadInputSaysWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "p.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	emb := collector.NewEmbeddedSink(st)
	for _, tc := range []struct {
		name string
		q    collector.JobMemoryQuery
		want string
	}{
		{"a zero step", collector.JobMemoryQuery{Start: t0, End: t0.Add(time.Hour)}, "step 0s"},
		{"an empty range", collector.JobMemoryQuery{Start: t0, End: t0, Step: time.Minute}, "is empty"},
		{"an empty job ID", collector.JobMemoryQuery{Jobs: []string{"a", ""}, Start: t0, End: t0.Add(time.Hour), Step: time.Minute}, "job 1: empty job ID"},
	} {
		if _, err := emb.JobMemory(ctx, tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// runningFleet is what the control plane's memory refinement reads: 1,000
// one-GPU jobs sampled every 30 s for 2 hours (240,000 process samples).
func runningFleet(jobs, samplesPerJob int) []collector.Sample {
	out := make([]collector.Sample, 0, jobs*samplesPerJob)
	for j := range jobs {
		uuid := fmt.Sprintf("GPU-%04d", j)
		for i := range samplesPerJob {
			used := uint64(10+j%60)<<30 + uint64(i)<<20
			out = append(out, collector.Sample{Time: t0.Add(time.Duration(i) * 30 * time.Second), Node: fmt.Sprintf("node-%03d", j/8),
				DeviceInfo:   nvml.DeviceInfo{UUID: uuid, Index: j % 8, Model: "NVIDIA H100 80GB HBM3", MemoryTotalBytes: 80 << 30},
				DeviceSample: nvml.DeviceSample{MemUsedBytes: used, MemTotalBytes: 80 << 30},
				Processes:    []collector.ProcessSample{{PID: 1000 + j, JobID: fmt.Sprintf("job-%04d", j), MemUsedBytes: used}}})
		}
	}
	return out
}

// The control plane's refinement query: 1-minute series of 1,000 running
// jobs, over their 2 hours and over the last 5 minutes, from the embedded
// store.
func BenchmarkJobMemory1kRunningJobsEmbedded(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "p.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	emb := collector.NewEmbeddedSink(st)
	const jobs, n = 1000, 240
	all := runningFleet(jobs, n)
	for lo := 0; lo < len(all); lo += 10000 {
		if err := emb.Write(ctx, all[lo:min(lo+10000, len(all))]); err != nil {
			b.Fatal(err)
		}
	}
	ids := make([]string, jobs)
	for j := range ids {
		ids[j] = fmt.Sprintf("job-%04d", j)
	}
	for _, tc := range []struct {
		name   string
		from   time.Duration
		points int
	}{
		{"whole_2h", 0, 120},              // the first refinement after a restart
		{"last_5m", 115 * time.Minute, 5}, // every later one reads what is new
	} {
		q := collector.JobMemoryQuery{Jobs: ids, Start: t0.Add(tc.from), End: t0.Add(2 * time.Hour), Step: time.Minute}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := emb.JobMemory(ctx, q)
				if err != nil || len(got) != jobs || len(got[0].Points) != tc.points {
					b.Fatalf("%d series, %v", len(got), err)
				}
			}
		})
	}
}

// The same from InfluxDB (Flux: the processes summed per job, GPU and
// sample time, then the most per window).
func BenchmarkJobMemory1kRunningJobsInflux(b *testing.B) {
	ctx := context.Background()
	srv := influxtest.Shared(b)
	o := collector.InfluxOptions{URL: srv.URL, Bucket: newBucket("jobmembench"), Timeout: 5 * time.Minute}
	sink, err := collector.NewInfluxSink(o)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	const jobs, n = 1000, 240
	all := runningFleet(jobs, n)
	for lo := 0; lo < len(all); lo += 20000 {
		if err := sink.Write(ctx, all[lo:min(lo+20000, len(all))]); err != nil {
			b.Fatal(err)
		}
	}
	iq, err := collector.NewInfluxQuery(o)
	if err != nil {
		b.Fatal(err)
	}
	defer iq.Close()
	ids := make([]string, jobs)
	for j := range ids {
		ids[j] = fmt.Sprintf("job-%04d", j)
	}
	for _, tc := range []struct {
		name   string
		from   time.Duration
		points int
	}{{"whole_2h", 0, 120}, {"last_5m", 115 * time.Minute, 5}} {
		q := collector.JobMemoryQuery{Jobs: ids, Start: t0.Add(tc.from), End: t0.Add(2 * time.Hour), Step: time.Minute}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := iq.JobMemory(ctx, q)
				if err != nil || len(got) != jobs || len(got[0].Points) != tc.points {
					b.Fatalf("%d series, %v", len(got), err)
				}
			}
		})
	}
}
