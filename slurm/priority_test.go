package slurm_test

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/plugins/headstart"
	"github.com/prescient-sched/prescient/slurm"
)

// The settings are read from scontrol show config as Slurm 22.05 wrote it
// for the test cluster (internal/slurmtest).
func TestParsePriority(t *testing.T) {
	b, err := os.ReadFile("testdata/scontrol_show_config_22.05.txt")
	if err != nil {
		t.Fatal(err)
	}
	p, err := slurm.ParsePriority(bytes.NewReader(b))
	want := slurm.Priority{Type: "priority/multifactor", WeightAge: 100000, MaxAge: 24 * time.Hour}
	if err != nil || p != want {
		t.Fatalf("got %+v, %v; want %+v", p, err, want)
	}
	if err := p.Ages(); err != nil {
		t.Error(err)
	}
	for _, bad := range []slurm.Priority{{Type: "priority/basic"}, {Type: "priority/multifactor", MaxAge: time.Hour},
		{Type: "priority/multifactor", WeightAge: 1}} {
		if err := bad.Ages(); err == nil {
			t.Errorf("%+v ages", bad)
		}
	}
	_, err = slurm.ParsePriority(strings.NewReader("PriorityType = priority/multifactor\nPriorityMaxAge = 7-xx\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2: PriorityMaxAge") {
		t.Errorf("bad MaxAge: %v", err)
	}
}

// Slurm's age factor less HeadStartNice orders jobs as the headstart
// order of the replays does (submit time plus estimate), wherever their
// keys are more than a point apart and no job has reached MaxAge.
func TestHeadStartNiceOrdersAsTheHeadStartPolicy(t *testing.T) {
	p := slurm.Priority{Type: "priority/multifactor", WeightAge: 10000, MaxAge: 14 * 24 * time.Hour}
	point := p.MaxAge / time.Duration(p.WeightAge)
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	type job struct {
		prio float64
		key  executor.Key
	}
	var jobs []job
	for range 500 {
		submit := now.Add(-time.Duration(rng.Int64N(int64(10 * 24 * time.Hour))))
		est := time.Duration(rng.Int64N(int64(slurm.HeadStartCap))) + time.Second
		age := now.Sub(submit).Seconds() / p.MaxAge.Seconds()
		j := cluster.NewJob("j", cluster.JobSpec{GPUs: 1}, submit)
		jobs = append(jobs, job{
			prio: float64(p.WeightAge)*age - float64(p.HeadStartNice(est)),
			key:  headstart.New().Key(&executor.JobView{Job: &j, Forecast: executor.Forecast{DurationP90: est}}, nil),
		})
	}
	for _, a := range jobs {
		for _, b := range jobs {
			apart := time.Duration((b.key[0] - a.key[0]) * float64(time.Second))
			if apart > 2*point && a.prio <= b.prio {
				t.Fatalf("key %.0f before %.0f (%s apart), but Slurm priority %.1f ≤ %.1f", a.key[0], b.key[0], apart, a.prio, b.prio)
			}
		}
	}
}

func FuzzParsePriority(f *testing.F) {
	b, err := os.ReadFile("testdata/scontrol_show_config_22.05.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("PriorityWeightAge = -1\n"))
	f.Add([]byte("PriorityMaxAge = 99999-00:00:00\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := slurm.ParsePriority(bytes.NewReader(in))
		if err != nil {
			return
		}
		if p.WeightAge < 0 || p.MaxAge < 0 {
			t.Fatalf("accepted %+v", p)
		}
		if p.Ages() == nil {
			for _, est := range []time.Duration{0, time.Hour, slurm.HeadStartCap, 1 << 62} {
				if n := p.HeadStartNice(est); n > 0 || n < -(1<<31-3) {
					t.Fatalf("%+v: nice %d for %s", p, n, est)
				}
			}
		}
	})
}
