package dashboard_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/internal/browsertest"
	"github.com/prescient-sched/prescient/service"
)

// pageSize is the jobs a page of the job list shows (PAGE_SIZE in jobs.js).
const pageSize = 50

// BenchmarkDashboardRefresh measures one refresh of the page in headless
// Chromium: the six API calls (fleet, stats over an hour, the newest page
// of jobs, recommendations, the idle forecast, models) through the real API
// server and the redrawing of every section, with 100 and 1,000 jobs
// queued on 16 GPUs.
func BenchmarkDashboardRefresh(b *testing.B) {
	for _, jobs := range []int{100, 1000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			s := newStack(b)
			addUtilization(s.fake, time.Now())
			tiers := cluster.Tiers()
			for i := range jobs {
				_, err := s.fake.Submit(context.Background(), service.SubmitRequest{Spec: cluster.JobSpec{
					Name: fmt.Sprintf("job-%d", i), Tenant: "ml", Tier: tiers[i%len(tiers)], GPUs: 1 + i%8, GPUMilli: cluster.MilliGPU,
					Labels: map[string]string{"workload": fmt.Sprintf("w%d", i%5)}}})
				if err != nil {
					b.Fatal(err)
				}
			}
			br := browsertest.Start(b)
			browsertest.Open(br, s.url)
			browsertest.Login(br, adminToken)
			refresh := chromedp.Evaluate[bool](`window.PrescientDashboard.refresh().then(() => true)`, chromedp.EvalAwaitPromise)
			for b.Loop() {
				ctx, cancel := context.WithTimeout(br.Context(), browsertest.StepTimeout)
				_, err := chromedp.Run(ctx, refresh)
				cancel()
				if err != nil {
					br.Fail("refresh", err)
				}
			}
			b.StopTimer()
			if rows := browsertest.Eval[int](br, "count the job rows", `document.querySelectorAll('#jobs tr[data-job-id]').length`); rows != min(jobs, pageSize) {
				b.Fatalf("the job list shows %d rows, want %d", rows, min(jobs, pageSize))
			}
		})
	}
}
