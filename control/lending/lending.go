package lending

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/control/live"
	"github.com/prescient-sched/prescient/control/telemetry"
	"github.com/prescient-sched/prescient/executor/lend"
	"github.com/prescient-sched/prescient/models/idle"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Config is which pools lend and how.
type Config struct {
	// Pools are the inference pools that lend: the values of the nodes'
	// cluster.PoolLabel.
	Pools []string
	// Every, MinLoan and Notice are lend.Policy's: how often loans are
	// decided, the shortest loan, the jobs' notice when a node is taken
	// back (defaults lend.DefaultEvery, DefaultMinLoan, DefaultNotice).
	Every, MinLoan, Notice time.Duration
	// Level is the quantile of the idle model's forecast lent on (default
	// lend.DefaultLevel); Recent caps the model by what was idle throughout
	// the last Recent, and is the rule without a model. Zero Recent is the
	// model alone, as in simulate: without a published idle model nothing
	// is lent then.
	Level  float64
	Recent time.Duration
	// Handover is how long a lent node waits before training is placed
	// on it (default DefaultHandover).
	Handover time.Duration
	// Headroom is the GPUs kept idle for the service beyond the forecast
	// (lend.Policy.Headroom; default and at least 1): a loan leaves the
	// service an idle GPU, so that its every GPU being busy says the
	// demand grew.
	Headroom int
}

// The defaults of Config.
const (
	DefaultHandover = time.Minute
	DefaultHeadroom = 1
)

// Check that the utilization the plane keeps covers the longest Recent.
const _ = uint(telemetry.History - telemetry.Step - lend.MaxRecent)

// WithDefaults is l with its zero values at their defaults (New sets
// them); a zero Recent stays the model alone.
func (l Config) WithDefaults() Config {
	pol := l.policy()
	l.Every, l.MinLoan, l.Notice = pol.Every, pol.MinLoan, pol.Notice
	l.Level = cmp.Or(l.Level, lend.DefaultLevel)
	l.Handover = cmp.Or(l.Handover, DefaultHandover)
	l.Headroom = cmp.Or(l.Headroom, DefaultHeadroom)
	return l
}

func (l Config) policy() lend.Policy {
	return lend.Policy{Every: l.Every, MinLoan: l.MinLoan, Notice: l.Notice, Headroom: l.Headroom}.WithDefaults()
}

// Validate checks l as it is, without defaults: lend.Settings.Validate,
// the pools, and what the live plane needs beside (a handover, a GPU of
// headroom). Each error names its field after prefix, a flag's
// ("--lend-") or a config's.
func (l Config) Validate(prefix string) error {
	var errs []error
	if len(l.Pools) == 0 {
		errs = append(errs, fmt.Errorf("%spools: no inference pools", prefix))
	}
	if slices.Contains(l.Pools, "") {
		errs = append(errs, fmt.Errorf("%spools: an empty pool name", prefix))
	}
	pol := lend.Policy{Every: l.Every, MinLoan: l.MinLoan, Notice: l.Notice, Headroom: l.Headroom}
	errs = append(errs, lend.Settings{Policy: pol, Level: l.Level, Recent: l.Recent}.Validate(prefix))
	if l.Handover <= 0 {
		errs = append(errs, fmt.Errorf("%shandover %s: want a positive duration", prefix, l.Handover))
	}
	if l.Headroom < 1 {
		errs = append(errs, fmt.Errorf("%sheadroom %d: at least 1 (a loan leaves the service an idle GPU, so that every GPU busy says the demand grew)", prefix, l.Headroom))
	}
	return errors.Join(errs...)
}

// Deps are what Lending uses of the plane.
type Deps struct {
	Store *store.Store
	Nodes service.NodeSource
	// Telemetry is where the pools' utilization comes from (nil: nothing
	// is lent), Util the plane's copy of it, Idle the idle model served.
	Telemetry collector.TelemetryStore
	Util      *telemetry.Utilization
	Idle      telemetry.IdleForecaster
	Advice    *advice.Book
	// Notifier hears node_lent, node_returning and node_serving; nil for
	// none.
	Notifier service.Notifier
	Mode     func() service.Mode
	// Changed tells the plane its state changed; Poke asks it to plan
	// soon.
	Changed, Poke func()
	Log           *slog.Logger
}

// Lending lends and takes back inference nodes. Its hooks run in the plan
// loop: Apply before the live state is read (the decisions of the last
// read), Reclaim once it is read (the jobs on nodes taken back), Watch
// after the plan (a read of the pools beside the loop, at most each
// minute). ForTraining, Inference and Loan answer from any goroutine.
type Lending struct {
	cfg *Config // nil: nothing is lent
	d   Deps
	log *slog.Logger
	// read is the read of the pools beside the loop (Watch).
	read live.Task

	mu sync.Mutex
	// loans are the inference nodes that were lent, by name, and gen
	// counts each pool's changes of them.
	loans map[string]*nodeLoan
	gen   map[string]uint64
	// pending are the decisions of the reads not applied yet;
	// forecastAt is when the last read that forecast started.
	pending    []decision
	forecastAt time.Time
}

// New makes lending with cfg (nil: off) on d.
func New(cfg *Config, d Deps) *Lending {
	if cfg != nil {
		c := cfg.WithDefaults() // the caller's stays as it was
		cfg = &c
	}
	return &Lending{cfg: cfg, d: d, log: d.Log, loans: map[string]*nodeLoan{}, gen: map[string]uint64{}}
}

// Wait waits for the read under way.
func (p *Lending) Wait() { p.read.Wait() }

// nodeLoan is an inference node that was lent: lent now, being taken
// back, or serving again.
type nodeLoan struct {
	pool  string
	state lend.State
	since time.Time // when it entered the state
	// spans are its loans of the last telemetry.History, oldest first, each
	// until idle.MaxGap after its take-back (a sample stands for that
	// long); the last is open while it is lent or returning.
	spans []store.LoanSpan
}

// served reports whether a node with loan l (nil: never lent) served
// inference at t: its utilization on loan is training's.
func (l *nodeLoan) served(t time.Time) bool {
	if l == nil {
		return true
	}
	for _, sp := range l.spans {
		if !t.Before(sp.From) && (sp.Until.IsZero() || t.Before(sp.Until)) {
			return false
		}
	}
	return true
}

// moved is l (nil: never lent) moved to state to at now: a loan opens a
// span, a return to serving closes it idle.MaxGap later; spans that ended
// before the history kept are dropped.
func (l *nodeLoan) moved(pool string, to lend.State, now time.Time) *nodeLoan {
	out := &nodeLoan{pool: pool, state: to, since: now}
	if l != nil {
		for _, sp := range l.spans {
			if sp.Until.IsZero() || sp.Until.After(now.Add(-telemetry.History)) {
				out.spans = append(out.spans, sp)
			}
		}
	}
	switch k := len(out.spans) - 1; {
	case to == lend.Lent && (k < 0 || !out.spans[k].Until.IsZero()):
		out.spans = append(out.spans, store.LoanSpan{From: now})
	case to == lend.Serving && k >= 0 && out.spans[k].Until.IsZero():
		out.spans[k].Until = now.Add(idle.MaxGap)
	}
	return out
}

// Inference is the inference pool node n belongs to, if any.
func (p *Lending) Inference(n *cluster.Node) (string, bool) {
	if p.cfg == nil {
		return "", false
	}
	pool := n.Labels[cluster.PoolLabel]
	return pool, pool != "" && slices.Contains(p.cfg.Pools, pool)
}

// ForTraining reports whether training may be placed on node n at now
// (its state aside): any node but an inference node not lent at least
// Handover ago.
func (p *Lending) ForTraining(n *cluster.Node, now time.Time) bool {
	if _, ok := p.Inference(n); !ok {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.loans[n.Name]
	return l != nil && l.state == lend.Lent && !now.Before(l.since.Add(p.cfg.Handover))
}

// Restore reads the loans from the store; those of nodes no longer
// in an inference pool (the configuration changed) are forgotten.
func (p *Lending) Restore(ctx context.Context) error {
	loans, err := p.d.Store.Loans(ctx)
	if err != nil {
		return err
	}
	pools := map[string]string{}
	for _, n := range p.d.Nodes.Nodes() {
		if pool, ok := p.Inference(&n); ok {
			pools[n.Name] = pool
		}
	}
	restored := map[string]*nodeLoan{}
	for _, l := range loans {
		pool, ok := pools[l.Node]
		if p.cfg == nil || (!ok && !slices.Contains(p.cfg.Pools, l.Pool)) {
			p.log.Info("lending: a loan is forgotten: its node is no longer in an inference pool", "node", l.Node, "pool", l.Pool, "state", l.State)
			if err := p.d.Store.DeleteLoan(ctx, l.Node); err != nil {
				return err
			}
			continue
		}
		st := lend.Serving
		switch l.State {
		case lend.Lent.String():
			st = lend.Lent
		case lend.Returning.String():
			st = lend.Returning
		}
		restored[l.Node] = &nodeLoan{pool: cmp.Or(pool, l.Pool), state: st, since: l.Since, spans: l.Spans}
	}
	p.mu.Lock()
	p.loans = restored
	p.mu.Unlock()
	return nil
}

// setLoan moves a node from state from (if it is still there) to state
// to at now, in the store first, and counts a change of its pool.
func (p *Lending) setLoan(ctx context.Context, node, pool string, from, to lend.State, now time.Time, msg string, attrs ...any) bool {
	p.mu.Lock()
	cur := p.loans[node]
	p.mu.Unlock()
	state := lend.Serving
	if cur != nil {
		state = cur.state
	}
	if state != from {
		return false // it moved since the decision
	}
	next := cur.moved(pool, to, now)
	if err := p.d.Store.PutLoan(ctx, store.Loan{Node: node, Pool: pool, State: to.String(), Since: now, Spans: next.spans}); err != nil {
		p.log.Error("lending: not recorded", "node", node, "state", to, "error", err)
		return false
	}
	p.mu.Lock()
	p.loans[node] = next
	p.gen[pool]++
	p.mu.Unlock()
	p.log.Info("lending: "+msg, append([]any{"node", node, "pool", pool}, attrs...)...)
	p.d.Changed()
	p.notify(ctx, "node_"+to.String(), node, pool, now, msg)
	return true
}

// Loan is node n's loan state; nil when it is not an inference node.
func (p *Lending) Loan(n *cluster.Node) *service.NodeLoan {
	pool, ok := p.Inference(n)
	if !ok {
		return nil
	}
	out := &service.NodeLoan{Pool: pool, State: lend.Serving.String()}
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.loans[n.Name]; l != nil {
		out.State, out.Since = l.state.String(), l.since
		if l.state == lend.Lent {
			out.Usable = l.since.Add(p.cfg.Handover)
		}
	}
	return out
}

// notify tells the webhooks of a node's loan change.
func (p *Lending) notify(ctx context.Context, typ, node, pool string, now time.Time, msg string) {
	if p.d.Notifier != nil {
		p.d.Notifier.Notify(ctx, service.LifecycleEvent{Type: typ, Time: now, Node: node, Pool: pool, Message: msg})
	}
}
