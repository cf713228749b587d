package datasets

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

func generate(t testing.TB, mutate func(*GenerateConfig)) []cluster.Job {
	t.Helper()
	cfg := DefaultGenerateConfig()
	cfg.Jobs = 5000
	if mutate != nil {
		mutate(&cfg)
	}
	jobs, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func TestGenerateIsDeterministicForASeed(t *testing.T) {
	a, b := generate(t, nil), generate(t, nil)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same config differ")
	}
	c := generate(t, func(c *GenerateConfig) { c.Seed = 2 })
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 1 and 2 give the same jobs")
	}
}

func TestGeneratedJobsAreValidFinishedHistory(t *testing.T) {
	jobs := generate(t, nil)
	assertSortedValid(t, jobs)
	cfg := DefaultGenerateConfig()
	ids := map[cluster.JobID]bool{}
	for _, j := range jobs {
		if ids[j.ID] {
			t.Fatalf("id %s twice", j.ID)
		}
		ids[j.ID] = true
		if !j.State.Terminal() || j.Attempts != 1 {
			t.Fatalf("job %s is %s after %d attempts, want finished after 1", j.ID, j.State, j.Attempts)
		}
		if j.SubmitTime.Before(cfg.Start) || j.StartTime.Before(j.SubmitTime) || !j.EndTime.Equal(j.StartTime.Add(j.Outcome.RunTime)) {
			t.Fatalf("job %s: submit %v, start %v, end %v, run %v", j.ID, j.SubmitTime, j.StartTime, j.EndTime, j.Outcome.RunTime)
		}
		if j.Outcome.RunTime < time.Second || j.Outcome.RunTime%time.Second != 0 {
			t.Fatalf("job %s runs %v, want whole seconds", j.ID, j.Outcome.RunTime)
		}
		assertPlausibleLabels(t, j)
	}
}

func assertPlausibleLabels(t *testing.T, j cluster.Job) {
	t.Helper()
	mem := j.Outcome.PeakGPUMemoryBytes
	if mem < int64(minJobMemGiB*float64(gib)) || mem > maxJobMemGiB*gib {
		t.Fatalf("job %s peak memory %d outside %g..%d GiB", j.ID, mem, minJobMemGiB, maxJobMemGiB)
	}
	power := j.Outcome.EnergyJ / j.Outcome.RunTime.Seconds() / float64(j.Spec.GPUs)
	if power < minJobPowerW-1 || power > maxJobPowerW+1 {
		t.Fatalf("job %s draws %.0f W per GPU", j.ID, power)
	}
	for _, k := range []string{cluster.LabelFramework, cluster.LabelModel, cluster.LabelBatchSize} {
		if j.Spec.Labels[k] == "" {
			t.Fatalf("job %s lacks label %s", j.ID, k)
		}
	}
	if wantGang := (j.Spec.GPUs + 7) / 8; j.Spec.GPUs > 8 && j.Spec.GangSize != wantGang {
		t.Fatalf("job %s with %d GPUs has gang size %d", j.ID, j.Spec.GPUs, j.Spec.GangSize)
	}
	if cp := j.LastCheckpoint; cp != nil && (!j.Spec.Checkpointable || cp.Time.After(j.EndTime) || cp.Time.Before(j.StartTime)) {
		t.Fatalf("job %s checkpoint %+v outside its run", j.ID, cp)
	}
	if want := map[cluster.JobState]int{cluster.StateSucceeded: 0, cluster.StateFailed: 1, cluster.StateCancelled: 143}[j.State]; j.Outcome.ExitCode != want {
		t.Fatalf("job %s %s with exit code %d", j.ID, j.State, j.Outcome.ExitCode)
	}
}

func TestGenerateConfigErrorsNameTheField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*GenerateConfig)
		want   string
	}{
		{"no jobs", func(c *GenerateConfig) { c.Jobs = 0 }, "jobs: 0 is outside"},
		{"too many jobs", func(c *GenerateConfig) { c.Jobs = MaxGenerateJobs + 1 }, "jobs:"},
		{"no start", func(c *GenerateConfig) { c.Start = time.Time{} }, "start: missing"},
		{"no tenants", func(c *GenerateConfig) { c.Tenants = 0 }, "tenants: 0 is outside"},
		{"a deadline share over 1", func(c *GenerateConfig) { c.DeadlineFraction = 1.5 }, "deadline_fraction"},
		{"a NaN deadline share", func(c *GenerateConfig) { c.DeadlineFraction = math.NaN() }, "deadline_fraction"},
		{"a tier that does not exist", func(c *GenerateConfig) { c.TierMix = map[cluster.Tier]float64{7: 1} }, "tier(7) is not a tier"},
		{"a negative tier weight", func(c *GenerateConfig) {
			c.TierMix = map[cluster.Tier]float64{cluster.TierBatch: -1, cluster.TierStandard: 2}
		}, "weight -1"},
		{"an infinite tier weight", func(c *GenerateConfig) { c.TierMix = map[cluster.Tier]float64{cluster.TierBatch: math.Inf(1)} }, "weight +Inf"},
		{"tier weights that sum to zero", func(c *GenerateConfig) { c.TierMix = map[cluster.Tier]float64{cluster.TierBatch: 0} }, "sum to 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name+" is rejected", func(t *testing.T) {
			cfg := DefaultGenerateConfig()
			tt.mutate(&cfg)
			_, err := Generate(cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to mention %q", err, tt.want)
			}
		})
	}
	cfg := GenerateConfig{}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "jobs") || !strings.Contains(err.Error(), "tenants") {
		t.Errorf("the zero config gives %v, want every bad field", err)
	}
}

func TestLabelMemoryChangesOnlyTheMemoryAndEnergyLabels(t *testing.T) {
	with := generate(t, nil)
	without := generate(t, func(c *GenerateConfig) { c.LabelMemory = false })
	for i := range with {
		with[i].Outcome.PeakGPUMemoryBytes, with[i].Outcome.EnergyJ = 0, 0
	}
	if !reflect.DeepEqual(with, without) {
		t.Error("LabelMemory changed more than the memory and energy labels")
	}
}

func TestDeadlineFractionChangesOnlyDeadlines(t *testing.T) {
	none := generate(t, func(c *GenerateConfig) { c.DeadlineFraction = 0 })
	some := generate(t, func(c *GenerateConfig) { c.DeadlineFraction = 0.3 })
	with := 0
	for i := range some {
		if some[i].Spec.HasDeadline() {
			with++
			if !some[i].Spec.Deadline.After(some[i].SubmitTime.Add(some[i].Outcome.RunTime)) {
				t.Fatalf("job %s deadline %v leaves no time to run", some[i].ID, some[i].Spec.Deadline)
			}
			some[i].Spec.Deadline = time.Time{}
		}
	}
	if share := float64(with) / float64(len(some)); math.Abs(share-0.3) > 0.02 {
		t.Errorf("%.3f of jobs have a deadline, want 0.3 ± 0.02", share)
	}
	if !reflect.DeepEqual(none, some) {
		t.Error("DeadlineFraction changed more than the deadlines")
	}
}

func TestTierMixAndTenants(t *testing.T) {
	jobs := generate(t, func(c *GenerateConfig) {
		c.TierMix = map[cluster.Tier]float64{cluster.TierBatch: 1, cluster.TierOpportunistic: 3}
		c.Tenants = 3
	})
	tiers, tenants := map[cluster.Tier]int{}, map[string]int{}
	for _, j := range jobs {
		tiers[j.Spec.Tier]++
		tenants[j.Spec.Tenant]++
	}
	if len(tiers) != 2 || math.Abs(float64(tiers[cluster.TierBatch])/float64(len(jobs))-0.25) > 0.02 {
		t.Errorf("tiers %v, want batch a quarter and opportunistic the rest", tiers)
	}
	// Zipf 2.05 over 3 tenants: weights 1, 2^-2.05, 3^-2.05.
	w := []float64{1, math.Pow(2, -2.05), math.Pow(3, -2.05)}
	want := w[0] / (w[0] + w[1] + w[2])
	if got := float64(tenants["tenant-01"]) / float64(len(jobs)); len(tenants) != 3 || math.Abs(got-want) > 0.02 {
		t.Errorf("tenants %v; tenant-01 share %.3f, want %.3f", tenants, got, want)
	}
	if d := DefaultTierMix(); len(d) != 4 {
		t.Errorf("DefaultTierMix() = %v", d)
	}
}

func TestPeakMemoryGrowsWithBatchSize(t *testing.T) {
	jobs := generate(t, func(c *GenerateConfig) { c.Jobs = 20000 })
	sum, n := map[string]float64{}, map[string]float64{}
	for _, j := range jobs {
		if j.Spec.Labels[cluster.LabelModel] == "resnet50" {
			b := j.Spec.Labels[cluster.LabelBatchSize]
			sum[b] += float64(j.Outcome.PeakGPUMemoryBytes)
			n[b]++
		}
	}
	if !(sum["32"]/n["32"] < sum["64"]/n["64"] && sum["64"]/n["64"] < sum["128"]/n["128"]) {
		t.Errorf("mean resnet50 memory by batch size 32/64/128: %.2g %.2g %.2g; want increasing",
			sum["32"]/n["32"], sum["64"]/n["64"], sum["128"]/n["128"])
	}
}

// phillyJobs reads the real Philly table.
func phillyJobs(t testing.TB) []cluster.Job {
	t.Helper()
	res, err := ReadTrace("philly:"+sharedDataset(t, "philly", "philly_jobs.csv"), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs
}

// workloadShape is what the calibration test compares.
type workloadShape struct {
	gpuShare          map[int]float64
	runS, oneGPURunS  []float64 // sorted
	hourly, weekdayly []float64 // jobs per hour of day, per weekday occurrence
	jobsPerHour       float64
}

// shapeOf measures jobs submitted from the day of from on.
func shapeOf(jobs []cluster.Job, from time.Time) workloadShape {
	s := workloadShape{gpuShare: map[int]float64{}, hourly: make([]float64, 24), weekdayly: make([]float64, 7)}
	from = from.Truncate(24 * time.Hour)
	n := 0
	for _, j := range jobs {
		s.gpuShare[j.Spec.GPUs] += 1 / float64(len(jobs))
		s.runS = append(s.runS, j.Outcome.RunTime.Seconds())
		if j.Spec.GPUs == 1 {
			s.oneGPURunS = append(s.oneGPURunS, j.Outcome.RunTime.Seconds())
		}
		if !j.SubmitTime.Before(from) {
			n++
			s.hourly[j.SubmitTime.Hour()]++
			s.weekdayly[j.SubmitTime.Weekday()]++
		}
	}
	last := jobs[len(jobs)-1].SubmitTime
	occurrences := make([]float64, 7)
	for d := from; d.Before(last); d = d.Add(24 * time.Hour) {
		occurrences[d.Weekday()]++
	}
	for d := range s.weekdayly {
		s.weekdayly[d] /= occurrences[d]
	}
	s.jobsPerHour = float64(n) / last.Sub(from).Hours()
	slices.Sort(s.runS)
	slices.Sort(s.oneGPURunS)
	return s
}

// phillyWindowStart re-measures the first day with at least 100 submissions.
func phillyWindowStart(jobs []cluster.Job) time.Time {
	perDay := map[time.Time]int{}
	for _, j := range jobs {
		day := j.SubmitTime.Truncate(24 * time.Hour)
		if perDay[day]++; perDay[day] >= 100 {
			return day // jobs are sorted: the first day to reach 100 is the earliest
		}
	}
	return time.Time{}
}

// TestGenerateMatchesPhilly generates 20,000 jobs and compares their shape
// with the real Philly table. Tolerances: GPU-count shares within 1
// percentage point (1-GPU) and 0.6 (2, 4, 8 GPUs); run-time median and P90
// within a factor 1.15, P99 within 1.5; hourly and weekday arrival profiles
// correlated at 0.9 or more; the arrival rate within 15%.
func TestGenerateMatchesPhilly(t *testing.T) {
	philly := phillyJobs(t)
	p := shapeOf(philly, phillyWindowStart(philly))
	cfg := DefaultGenerateConfig()
	cfg.Jobs, cfg.Seed = 20000, 7
	gen, err := Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := shapeOf(gen, cfg.Start)

	for gpus, tol := range map[int]float64{1: 0.01, 2: 0.006, 4: 0.006, 8: 0.006} {
		if d := math.Abs(g.gpuShare[gpus] - p.gpuShare[gpus]); d > tol {
			t.Errorf("%d-GPU share: generated %.4f, Philly %.4f (tolerance %.3f)", gpus, g.gpuShare[gpus], p.gpuShare[gpus], tol)
		}
	}
	for _, c := range []struct {
		name      string
		gen, phl  []float64
		q, factor float64
	}{
		{"run-time median", g.runS, p.runS, 0.5, 1.15},
		{"run-time P90", g.runS, p.runS, 0.9, 1.15},
		{"run-time P99", g.runS, p.runS, 0.99, 1.5},
		{"1-GPU run-time median", g.oneGPURunS, p.oneGPURunS, 0.5, 1.15},
		{"1-GPU run-time P90", g.oneGPURunS, p.oneGPURunS, 0.9, 1.15},
	} {
		gq, pq := quantile(c.gen, c.q), quantile(c.phl, c.q)
		t.Logf("%s: generated %.0f s, Philly %.0f s", c.name, gq, pq)
		if r := gq / pq; r > c.factor || r < 1/c.factor {
			t.Errorf("%s: generated %.0f s, Philly %.0f s (ratio %.2f, tolerance ×%.2f)", c.name, gq, pq, r, c.factor)
		}
	}
	t.Logf("GPU shares: generated %v, Philly %v", g.gpuShare, p.gpuShare)
	t.Logf("hourly r = %.3f, weekday r = %.3f, rate %.1f/h vs %.1f/h",
		correlation(g.hourly, p.hourly), correlation(g.weekdayly, p.weekdayly), g.jobsPerHour, p.jobsPerHour)
	if r := correlation(g.hourly, p.hourly); r < 0.9 {
		t.Errorf("hourly arrival profile correlation %.3f < 0.9\n gen %v\nphilly %v", r, g.hourly, p.hourly)
	}
	if r := correlation(g.weekdayly, p.weekdayly); r < 0.9 {
		t.Errorf("weekday arrival profile correlation %.3f < 0.9\n gen %v\nphilly %v", r, g.weekdayly, p.weekdayly)
	}
	if r := g.jobsPerHour / p.jobsPerHour; math.Abs(r-1) > 0.15 {
		t.Errorf("arrival rate: generated %.1f/h, Philly %.1f/h", g.jobsPerHour, p.jobsPerHour)
	}
}

func correlation(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma += a[i] / float64(len(a))
		mb += b[i] / float64(len(b))
	}
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

// TestCalibrationTablesMatchPhillyFile re-measures the embedded tables from
// the real file, so that an edit to either is caught.
func TestCalibrationTablesMatchPhillyFile(t *testing.T) {
	jobs := phillyJobs(t)
	counts := map[int]int{}
	byRow := make([][]float64, len(phillyRunTimeQuantiles))
	for _, j := range jobs {
		counts[j.Spec.GPUs]++
		r := runTimeRowFor(j.Spec.GPUs)
		byRow[r] = append(byRow[r], j.Outcome.RunTime.Seconds())
	}
	for _, c := range phillyGPUCounts {
		if counts[c.gpus] != c.jobs {
			t.Errorf("%d-GPU jobs: table %d, file %d", c.gpus, c.jobs, counts[c.gpus])
		}
		delete(counts, c.gpus)
	}
	if len(counts) > 0 {
		t.Errorf("GPU counts missing from the table: %v", counts)
	}
	for r, row := range phillyRunTimeQuantiles {
		slices.Sort(byRow[r])
		for i, lvl := range phillyQuantileLevels {
			if got := quantile(byRow[r], lvl); math.Abs(got-row.runS[i]) > 0.5 {
				t.Errorf("run time P%g of jobs up to %d GPUs: table %g, file %.1f", lvl*100, row.maxGPUs, row.runS[i], got)
			}
		}
	}
	from := phillyWindowStart(jobs)
	if want := time.Date(2017, 9, 24, 0, 0, 0, 0, time.UTC); !from.Equal(want) {
		t.Errorf("window starts %v, table assumes %v", from, want)
	}
	s := shapeOf(jobs, from)
	n := 0.0
	for _, h := range s.hourly {
		n += h
	}
	if int(n) != phillyWindowJobs {
		t.Errorf("window holds %.0f jobs, table says %d", n, phillyWindowJobs)
	}
	for h, c := range s.hourly {
		if got := c / (n / 24); math.Abs(got-phillyHourFactor[h]) > 0.0006 {
			t.Errorf("hour %d factor: table %.3f, file %.4f", h, phillyHourFactor[h], got)
		}
	}
}

// TestGeneratedOutcomesMatchAcmeSummary checks the outcome shares and the
// queueing-delay constants against AcmeTrace's Philly row, and the
// generated shares against the constants.
func TestGeneratedOutcomesMatchAcmeSummary(t *testing.T) {
	row := acmePhillyRow(t)
	for key, want := range map[string]float64{
		"complete_rate_gpu": phillySucceededShare, "cancel_rate_gpu": phillyCancelledShare, "fail_rate_gpu": phillyFailedShare,
		"med_que_time_gpu": phillyQueueMedianS, "avg_que_time_gpu": phillyQueueMeanS,
	} {
		if got, err := strconv.ParseFloat(row[key], 64); err != nil || got != want {
			t.Errorf("cluster_summary.csv Philly %s = %q, calibration has %g", key, row[key], want)
		}
	}
	jobs := generate(t, func(c *GenerateConfig) { c.Jobs = 20000 })
	states := map[cluster.JobState]float64{}
	var queue []float64
	for _, j := range jobs {
		states[j.State] += 1 / float64(len(jobs))
		queue = append(queue, j.StartTime.Sub(j.SubmitTime).Seconds())
	}
	sum := phillySucceededShare + phillyCancelledShare + phillyFailedShare
	for s, want := range map[cluster.JobState]float64{
		cluster.StateSucceeded: phillySucceededShare / sum, cluster.StateFailed: phillyFailedShare / sum, cluster.StateCancelled: phillyCancelledShare / sum,
	} {
		if math.Abs(states[s]-want) > 0.015 {
			t.Errorf("%s share %.3f, want %.3f ± 0.015", s, states[s], want)
		}
	}
	slices.Sort(queue)
	if r := quantile(queue, 0.5) / phillyQueueMedianS; r > 1.15 || r < 1/1.15 {
		t.Errorf("median queueing delay %.0f s, want about %d s", quantile(queue, 0.5), phillyQueueMedianS)
	}
}

// acmePhillyRow reads the Philly row of AcmeTrace's cluster summary.
func acmePhillyRow(t *testing.T) map[string]string {
	t.Helper()
	rc, err := OpenFile(sharedDataset(t, "acme-summary", "cluster_summary.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rows, err := csv.NewReader(rc).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows[1:] {
		if r[0] == "Philly" {
			m := map[string]string{}
			for i, k := range rows[0] {
				m[k] = r[i]
			}
			return m
		}
	}
	t.Fatal("cluster_summary.csv has no Philly row")
	return nil
}

// TestGenerateGolden pins the first jobs of seed 1: a change to the
// calibration, the draw order or a default shows up here. Run with -update
// after checking that the change is meant.
func TestGenerateGolden(t *testing.T) {
	jobs := generate(t, func(c *GenerateConfig) { c.Jobs = 200 })
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, jobs[:5]); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "generate_seed1.jsonl")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := readTestdata(t, "generate_seed1.jsonl"); !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("seed 1 now generates\n%s\nwant\n%s", buf.Bytes(), want)
	}
}
