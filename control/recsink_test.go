package control

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// recordingSink is a RecommendationSink that keeps what it hears.
type recordingSink struct {
	mu   sync.Mutex
	recs []service.Recommendation
}

func (s *recordingSink) Recommended(_ context.Context, r service.Recommendation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs = append(s.recs, r)
}

func TestTheRecommendationSinkHearsEachRecordedRecommendationOnce(t *testing.T) {
	sink := &recordingSink{}
	e := newEnv(t, fleetOf(1, 8), func(c *Config) { c.Mode = service.ModeAdvisor; c.Recommendations = sink })
	e.submit("a", spec(4, time.Hour))
	e.submit("b", spec(8, time.Hour)) // waits for a
	for range 3 {
		e.plane.cycle(e.ctx)
		e.clock.Advance(time.Minute)
	}
	stored, err := e.plane.Recommendations(e.ctx, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.recs) == 0 || len(sink.recs) != len(stored) {
		t.Fatalf("the sink heard %d recommendations, the store holds %d: want each once", len(sink.recs), len(stored))
	}
	byID := map[int64]service.Recommendation{}
	for _, r := range stored {
		byID[r.ID] = r
	}
	for _, r := range sink.recs {
		s, ok := byID[r.ID]
		if !ok || s.Job != r.Job || s.Kind != r.Kind || s.Reason != r.Reason || r.Status != "open" {
			t.Errorf("heard %+v, stored %+v", r, s)
		}
		if r.Job == cluster.JobID("a") && r.Details["placement"] == nil {
			t.Errorf("the start of a carries no placement: %+v", r.Details)
		}
	}
}
