package parking

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control/advice"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/executor/sim"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// Config is when nodes park and wake (park.Policy's IdleAfter, Forecast
// and Lookahead), and how they power down and up.
type Config struct {
	// IdleAfter parks a node that has run nothing that long; with
	// Forecast a node is parked before when the outlook finds it spare,
	// and parked nodes are woken ahead of the demand.
	IdleAfter time.Duration
	Forecast  bool
	// Lookahead is how far the forecast looks (default
	// park.DefaultLookahead).
	Lookahead time.Duration
	// Suspend and Resume are the programs that power a node down and up.
	Suspend, Resume string
	// WakeTimeout is how long a woken node may take to be awake (default
	// DefaultWakeTimeout).
	WakeTimeout time.Duration
}

// DefaultWakeTimeout is how long a woken node may take to be ready unless
// Config says otherwise (Slurm's ResumeTimeout is 60 s; a GPU server's
// firmware alone often takes minutes).
const DefaultWakeTimeout = 10 * time.Minute

// powerProgramTimeout bounds one run of Suspend or Resume; the program's
// own children get powerProgramWait more to let go of its output.
const (
	powerProgramTimeout = time.Minute
	powerProgramWait    = 5 * time.Second
)

// WithDefaults is c with its zero durations at their defaults.
func (c Config) WithDefaults() Config {
	c.Lookahead = cmp.Or(c.Lookahead, park.DefaultLookahead)
	c.WakeTimeout = cmp.Or(c.WakeTimeout, DefaultWakeTimeout)
	return c
}

// Validate checks c.
func (c *Config) Validate() error {
	var errs []error
	if c.IdleAfter <= 0 {
		errs = append(errs, fmt.Errorf("control: config: parking: IdleAfter %s: want a positive duration", c.IdleAfter))
	}
	if c.Lookahead < 0 || c.WakeTimeout < 0 {
		errs = append(errs, errors.New("control: config: parking: Lookahead and WakeTimeout must not be negative"))
	}
	return errors.Join(errs...)
}

// parkedNode is a node parked or being woken (its park.Record), under
// Parking's mu.
type parkedNode struct {
	park.Record
	node cluster.Node // as it was when it parked, ready
}

// parseState reads a parked node's state as the store keeps it
// (park.State's String).
func parseState(s string) (park.State, error) {
	for _, st := range []park.State{park.Parked, park.Waking} {
		if s == st.String() {
			return st, nil
		}
	}
	return park.Awake, fmt.Errorf("parked node in state %q, want parked or waking", s)
}

// loopState is what the plan loop alone keeps of parking.
type loopState struct {
	emptySince map[string]time.Time // the awake nodes that run nothing, since when
	hold       map[string]time.Time // nodes whose Suspend or Cordon failed: not parked before
	// notParked are the nodes this plane woke, found awake or failed to
	// record parked: a Cordoner's mark on one is this plane's, and
	// settleCordons takes it off.
	notParked map[string]bool
	// marksFrom is when the plane, started, deals with the Cordoner's
	// marks (its placements and the Cordoner's view synced by then), and
	// reconciled whether it has compared the parked nodes it restored
	// with them.
	marksFrom  time.Time
	reconciled bool
	// from is when parking decides again after a restart that found
	// parked nodes.
	from time.Time
}

// powerRun is a Suspend or Resume program's run that ended, for the node
// in state state since since.
type powerRun struct {
	node  string
	state park.State
	since time.Time
	err   error
}

// Deps are what Parking uses of the plane.
type Deps struct {
	Store *store.Store
	Nodes service.NodeSource
	// Cordoner keeps parked nodes from other schedulers' work; nil where
	// the plane alone places work.
	Cordoner service.Cordoner
	// Planner plans the waiting jobs on the parked nodes (park.Needed),
	// with the live state's tenants.
	Planner executor.Planner
	Advice  *advice.Book
	// Notifier hears node_parked, node_waking and node_awake; nil for
	// none.
	Notifier service.Notifier
	Mode     func() service.Mode
	// Inference reports whether a node is an inference node, whose power
	// lending decides.
	Inference func(n *cluster.Node) bool
	// ArrivalRate is the GPUs arriving per second lately (park.Arrivals).
	ArrivalRate func(now time.Time) float64
	// Changed tells the plane its state changed; Poke asks it to plan
	// soon.
	Changed, Poke func()
	// Background holds the power programs' runs: the plane waits for it
	// on its way out.
	Background *sync.WaitGroup
	// NodeSyncTimeout is how long after a start the nodes take to
	// register again and the Cordoner's view to sync.
	NodeSyncTimeout time.Duration
	Clock           func() time.Time
	Log             *slog.Logger
}

// Parking parks and wakes nodes: its hooks run in the plan loop (Settle
// before the live state is read, Decide after the plan); Fleet, Drained
// and BootTime answer from any goroutine.
type Parking struct {
	cfg *Config // nil: parking off (the Cordoner's marks are still settled)
	d   Deps
	log *slog.Logger

	mu        sync.Mutex
	parked    map[string]*parkedNode
	powerRuns []powerRun    // the programs that ended since the last cycle
	boot      time.Duration // the woken nodes' boot time (BootTime)

	loop loopState // the plan loop's own
}

// New makes parking with cfg (nil: off) on d.
func New(cfg *Config, d Deps) *Parking {
	if cfg != nil {
		c := cfg.WithDefaults() // the caller's stays as it was
		cfg = &c
	}
	return &Parking{cfg: cfg, d: d, log: d.Log, parked: map[string]*parkedNode{},
		loop: loopState{emptySince: map[string]time.Time{}, hold: map[string]time.Time{}, notParked: map[string]bool{}}}
}

// Restore reads the parked nodes from the store, each with when it
// may be woken again, and learns the boots kept there. With parking off
// they are forgotten, and so taken back into the plan: whatever powers
// them up again (by hand) makes them usable.
func (p *Parking) Restore(ctx context.Context) error {
	rows, err := p.d.Store.ParkedNodes(ctx)
	if err != nil {
		return err
	}
	parked := map[string]*parkedNode{}
	for _, r := range rows {
		if p.cfg == nil {
			p.log.Warn("parking: a node was parked and parking is off: it is planned on again once it is up; power it up by hand",
				"node", r.Node.Name, "state", r.State, "since", r.Since)
			if err := p.d.Store.DeleteParked(ctx, r.Node.Name); err != nil {
				return err
			}
			continue
		}
		st, err := parseState(r.State)
		if err != nil {
			return fmt.Errorf("node %s: %w", r.Node.Name, err)
		}
		// A node restored waking may be down and booting: its Resume is not
		// run again when it is seen down.
		parked[r.Node.Name] = &parkedNode{Record: park.Record{State: st, Since: r.Since, ResumedAgain: st == park.Waking,
			WakeAfter: r.WakeAfter}, node: r.Node}
	}
	boots, err := p.d.Store.Boots(ctx)
	if err != nil {
		return err
	}
	for _, b := range boots {
		p.learnBoot(b.Boot)
	}
	p.mu.Lock()
	p.parked = parked
	p.mu.Unlock()
	p.loop.marksFrom = p.d.Clock().UTC().Add(p.d.NodeSyncTimeout)
	if len(parked) > 0 {
		p.loop.from = p.loop.marksFrom
	}
	return nil
}

// Fleet is nodes with the parked nodes the node source does not
// list (a node that is off has no agent), as they were when they parked,
// and each parked or waking node's state.
func (p *Parking) Fleet(nodes []cluster.Node) ([]cluster.Node, map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.parked) == 0 {
		return nodes, nil
	}
	states := make(map[string]string, len(p.parked))
	listed := map[string]bool{}
	for i := range nodes {
		listed[nodes[i].Name] = true
	}
	var away []cluster.Node
	for name, pn := range p.parked {
		states[name] = pn.State.String()
		if !listed[name] {
			away = append(away, pn.node)
		}
	}
	slices.SortFunc(away, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	return append(slices.Clone(nodes), away...), states
}

// Drained reports whether node is parked or waking: out of the plan.
func (p *Parking) Drained(node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.parked[node] != nil
}

// learnBoot adds a boot seen to the decayed mean BootTime returns.
func (p *Parking) learnBoot(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.boot = cmp.Or(p.boot, d) + (d-cmp.Or(p.boot, d))/4
}

// BootTime is how long a woken node takes to be awake: the decayed mean
// of the wakes seen (each weighs a quarter), sim.DefaultWakeTime before
// the first.
func (p *Parking) BootTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return cmp.Or(p.boot, sim.DefaultWakeTime)
}
