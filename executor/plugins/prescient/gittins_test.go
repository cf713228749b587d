package prescient

import (
	"math"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/executor"
)

// bruteGittins is 1/G for median 1, spread sigma and attained alpha by
// direct integration on a fine linear grid, independent of the table.
func bruteGittins(sigma, alpha float64) float64 {
	surv := func(x float64) float64 {
		if x <= 0 {
			return 1
		}
		return 0.5 * math.Erfc(math.Log(x)/(sigma*math.Sqrt2))
	}
	sa := surv(alpha)
	const step = 1e-3
	best, work := 0.0, 0.0
	for x := alpha; x < alpha+200; x += step {
		work += (surv(x) + surv(x+step)) / 2 * step
		if r := (sa - surv(x+step)) / work; r > best {
			best = r
		}
	}
	return 1 / best
}

func TestGittinsTableMatchesDirectIntegration(t *testing.T) {
	for _, c := range []struct{ sigma, alpha float64 }{
		{0.5, 0}, {1, 0}, {2, 0}, {1, 0.5}, {1, 2}, {2, 5}, {0.3, 0.8}, {1.7, 0.05},
	} {
		got, want := scaledGittins(c.sigma, c.alpha), bruteGittins(c.sigma, c.alpha)
		if math.Abs(got-want) > 0.02*want {
			t.Errorf("σ %.1f, α %.2f: table %.4f, direct %.4f", c.sigma, c.alpha, got, want)
		}
	}
}

func view(p50, p90, progress time.Duration) *executor.JobView {
	return &executor.JobView{Forecast: executor.Forecast{DurationP50: p50, DurationP90: p90}, Progress: progress}
}

func TestGittinsLength(t *testing.T) {
	h := time.Hour
	// A sure forecast (P90 = P50) is the remaining P50.
	if got := gittinsLength(view(h, h, 20*time.Minute)); got != (40 * time.Minute).Seconds() {
		t.Errorf("sure forecast: %.0fs, want 2400s", got)
	}
	// A narrow one is close to it.
	if got := gittinsLength(view(h, 66*time.Minute, 0)); math.Abs(got-3600) > 0.05*3600 {
		t.Errorf("narrow forecast: %.0fs, want about 3600s", got)
	}
	// A very wide one ranks a fresh job ahead of its median: a short first
	// stretch may finish it.
	wide := gittinsLength(view(h, 20*h, 0))
	if !(wide < 3600) {
		t.Errorf("wide forecast, not yet run: %.0fs, want under the median's 3600s", wide)
	}
	// Having run well past its median, a job of a wide forecast ranks
	// later than when it started (its hazard falls).
	if late := gittinsLength(view(h, 20*h, 5*h)); !(late > wide) {
		t.Errorf("wide forecast after 5h: %.0fs, want more than the fresh job's %.0fs", late, wide)
	}
	// Never below a second.
	if got := gittinsLength(view(time.Second, time.Second, time.Hour)); got != 1 {
		t.Errorf("finished forecast: %.3fs, want 1s", got)
	}
}

func BenchmarkGittinsLength(b *testing.B) {
	v := view(time.Hour, 5*time.Hour, 20*time.Minute)
	gittinsLength(v)
	b.ResetTimer()
	for b.Loop() {
		gittinsLength(v)
	}
}
