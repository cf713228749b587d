// Package advice is the advisor's book of recommendations: each is
// recorded in the store once while it stays the same, handed to the
// Recommendations sink (the Kubernetes backend writes it on the pods), and
// dismissed once the decision that made it no longer stands. The plan
// loop and each concern of the plane (idle jobs, lending, parking)
// recommend through one Book, each dismissing only its own kinds.
package advice

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// The kinds of recommendations, by who makes them.
const (
	Start   = "start"   // the plan: start a job there
	Preempt = "preempt" // the plan: preempt a job for another
	Idle    = "idle"    // idle jobs: a job holds its GPUs idle
	Lend    = "lend"    // lending: lend an inference node
	Reclaim = "reclaim" // lending: take one back
	Park    = "park"    // parking: power a node down
	Wake    = "wake"    // parking: wake a parked node
)

// Details is the JSON of a recommendation's details; each kind sets its
// own fields.
type Details struct {
	Placement        []string  `json:"placement,omitempty"`
	For              string    `json:"for,omitempty"`
	StopBy           time.Time `json:"stop_by,omitzero"`
	LostGPUS         float64   `json:"lost_gpu_s,omitempty"`
	CheckpointFirst  bool      `json:"checkpoint_first,omitempty"`
	CheckpointEveryS float64   `json:"checkpoint_every_s,omitempty"`
	DurationP50S     float64   `json:"duration_p50_s,omitempty"`
	DurationP90S     float64   `json:"duration_p90_s,omitempty"`
	ForecastSource   string    `json:"forecast_source,omitempty"`
	// An idle recommendation's: the job's GPUs and how long all of them
	// have been below the idle threshold.
	GPUs       []string `json:"gpus,omitempty"`
	IdleForS   float64  `json:"idle_for_s,omitempty"`
	ThresholdP float64  `json:"threshold_pct,omitempty"`
	// A lend or reclaim recommendation's: the inference node and its
	// pool, the pool's idle GPUs forecast at each step of the decision,
	// its busy GPUs now and the idle GPUs counted on for a loan. A park
	// or wake recommendation's: the node.
	Node        string    `json:"node,omitempty"`
	Pool        string    `json:"pool,omitempty"`
	IdleAhead   []float64 `json:"idle_ahead,omitempty"`
	BusyGPUs    *float64  `json:"busy_gpus,omitempty"`
	IdleForLoan *float64  `json:"idle_for_loan,omitempty"`
}

// key identifies a recommendation for deduplication: what is recommended,
// not when.
func key(kind string, job cluster.JobID, details json.RawMessage) string {
	var d Details
	_ = json.Unmarshal(details, &d) // a recommendation of another shape has a key of its own
	return kind + "|" + string(job) + "|" + strings.Join(d.Placement, ",") + "|" + d.For + "|" + d.Node
}

// Book records recommendations. Safe for concurrent use.
type Book struct {
	store *store.Store
	sink  service.RecommendationSink // nil for none
	log   *slog.Logger

	mu   sync.Mutex
	open map[string]int64 // the open recommendations' IDs, by key
}

// New makes a book over st; sink, when not nil, hears each recommendation
// recorded.
func New(st *store.Store, sink service.RecommendationSink, log *slog.Logger) *Book {
	return &Book{store: st, sink: sink, log: log, open: map[string]int64{}}
}

// Restore reads the open recommendations from the store, so that a
// restarted plane neither records them again nor leaves them open when
// they no longer stand.
func (b *Book) Restore(ctx context.Context) error {
	recs, err := b.store.ListRecommendations(ctx, time.Time{}, 0)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range recs {
		if r.Status == store.RecommendationOpen {
			b.open[key(r.Kind, r.JobID, r.Details)] = r.ID
		}
	}
	return nil
}

// Add records a recommendation unless the same one is open, and marks
// its key in current (what the caller's decision recommends now).
func (b *Book) Add(ctx context.Context, now time.Time, current map[string]bool, kind string, job cluster.JobID, reason string, d Details) {
	details, err := json.Marshal(d)
	if err != nil {
		b.log.Error("recommendation details", "error", err)
		return
	}
	k := key(kind, job, details)
	current[k] = true
	b.mu.Lock()
	_, seen := b.open[k]
	b.mu.Unlock()
	if seen {
		return
	}
	id, err := b.store.AddRecommendation(ctx, store.Recommendation{Time: now, JobID: job, Kind: kind, Reason: reason, Details: details})
	if err != nil {
		b.log.Error("recommendation not recorded", "job", job, "kind", kind, "error", err)
		return
	}
	b.mu.Lock()
	b.open[k] = id
	b.mu.Unlock()
	if b.sink != nil {
		r := service.Recommendation{ID: id, Time: now, Job: job, Kind: kind, Reason: reason, Status: string(store.RecommendationOpen)}
		_ = json.Unmarshal(details, &r.Details) // marshalled above from Details
		b.sink.Recommended(ctx, r)
	}
}

// Dismiss dismisses the open recommendations of the kinds the caller owns
// (of) that are not in current.
func (b *Book) Dismiss(ctx context.Context, current map[string]bool, of ...string) {
	mine := map[string]bool{}
	for _, k := range of {
		mine[k] = true
	}
	b.mu.Lock()
	stale := map[string]int64{}
	for k, id := range b.open {
		kind, _, _ := strings.Cut(k, "|")
		if !current[k] && mine[kind] {
			stale[k] = id
		}
	}
	b.mu.Unlock()
	for k, id := range stale {
		if err := b.store.SetRecommendationStatus(ctx, id, store.RecommendationDismissed); err != nil {
			b.log.Error("stale recommendation not dismissed", "id", id, "error", err)
			continue
		}
		b.mu.Lock()
		delete(b.open, k)
		b.mu.Unlock()
	}
}
