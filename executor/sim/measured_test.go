package sim_test

import (
	"strings"
	"testing"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/sim"
)

func TestDecodePowerFileNamesTheBadField(t *testing.T) {
	good := `{"from":"2026-11-30T00:00:00Z","until":"2026-11-30T06:00:00Z","threshold_pct":5,"models":[{"model":"Tesla V100-SXM2-32GB","gpus":4,"idle_minutes":720,"busy_minutes":720,"limit_w":300,"idle_fraction":0.15,"load_fraction":0.7}]}`
	p, err := sim.DecodePowerFile(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	if w := p.Power()(cluster.NewGPU(0, "V100M32")); w.IdleW != 45 || w.BusyW < 209.999 || w.BusyW > 210.001 {
		t.Errorf("V100M32 from a V100-SXM2 measurement: %+v", w)
	}
	for in, want := range map[string]string{
		`{"models":[]}`: "models: none",
		`{"models":[{"model":"","idle_fraction":0.1,"load_fraction":0.5}]}`:                                                              "models[0].model",
		`{"models":[{"model":"V100","idle_fraction":0,"load_fraction":0.5}]}`:                                                            "models[0].idle_fraction",
		`{"models":[{"model":"V100","idle_fraction":0.2,"load_fraction":0.1}]}`:                                                          "models[0].load_fraction",
		`{"models":[{"model":"V100","idle_fraction":0.2,"load_fraction":0.5},{"model":"v100","idle_fraction":0.2,"load_fraction":0.5}]}`: "models[1].model",
		`{"models":[{"model":"V100","idle_fraction":0.2,"load_fraction":0.5,"limit_w":-1}]}`:                                             "models[0].limit_w",
		`{"modles":[]}`: "unknown field",
		`{`:             "power model",
	} {
		if _, err := sim.DecodePowerFile(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %s", in, err, want)
		}
	}
}

func FuzzDecodePowerFile(f *testing.F) {
	f.Add(`{"models":[{"model":"V100","idle_fraction":0.15,"load_fraction":0.7,"limit_w":300}]}`)
	f.Add(`{"models":[{"model":"A100","idle_fraction":1e-300,"load_fraction":1.2}]}`)
	f.Add(`{"models":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := sim.DecodePowerFile(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range []string{"V100", "A100-SXM4-80GB", "", "K80"} {
			w := p.Power()(cluster.NewGPU(0, m))
			if !(w.IdleW >= 0 && w.BusyW >= w.IdleW) {
				t.Fatalf("%s: %+v from an accepted file %s", m, w, in)
			}
		}
	})
}
