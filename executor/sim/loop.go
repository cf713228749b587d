package sim

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/executor/park"
)

// loop runs the replay. Each step:
//
//  1. move the clock to the next arrival or event, accounting for the time
//     passed (GPU allocation, energy, tenants' decayed usage);
//  2. queue the jobs submitted then, with their forecasts;
//  3. handle the events due then (finishes, stops, failures, repairs);
//  4. if anything changed that could start or displace a job, plan and
//     apply the plan;
//  5. with forecast parking, park the empty nodes the forecasts find spare.
func (s *Simulator) loop(ctx context.Context) error {
	next, total := 0, len(s.jobs)
	s.scheduleFailure()
	for step := 0; s.acct.ended() < total; step++ {
		if next >= total && s.ev.len() == 0 {
			s.log.Warn("replay stalled: jobs left that nothing will start", "queued", s.queueLen())
			s.cut = CutStalled
			break
		}
		t := s.nextTime(next)
		if !s.cfg.Until.IsZero() && t.After(s.cfg.Until) {
			s.cut = CutUntil
			break
		}
		s.advance(t)
		var err error
		if next, err = s.arrive(ctx, next); err != nil {
			return err
		}
		for s.ev.len() > 0 && !s.ev.next().After(t) {
			if err := s.handle(s.ev.pop()); err != nil {
				return err
			}
		}
		if s.dirty {
			if err := s.plan(ctx); err != nil {
				return err
			}
		}
		s.acct.park.review(s)
		if err := s.stepDone(ctx, step); err != nil {
			return err
		}
		if !s.cfg.StopBy.IsZero() && s.acct.ended() < total && time.Now().After(s.cfg.StopBy) {
			s.cut = CutBudget
			break
		}
	}
	return nil
}

func (s *Simulator) nextTime(next int) time.Time {
	switch {
	case next >= len(s.jobs):
		return s.ev.next()
	case s.ev.len() == 0:
		return s.jobs[next].job.SubmitTime
	}
	if at := s.jobs[next].job.SubmitTime; at.Before(s.ev.next()) {
		return at
	}
	return s.ev.next()
}

func (s *Simulator) stepDone(ctx context.Context, step int) error {
	if s.cfg.Check {
		if err := s.check(); err != nil {
			return err
		}
	}
	s.acct.sampleQueue(s.now, s.queueLen())
	if step%4096 == 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		if s.cfg.Progress != nil {
			s.cfg.Progress(s.acct.finished+s.acct.withdrawn, len(s.jobs))
		}
	}
	return nil
}

// arrive queues the jobs submitted at the current time, from index next.
func (s *Simulator) arrive(ctx context.Context, next int) (int, error) {
	var batch []*cluster.Job
	first := next
	for ; next < len(s.jobs) && !s.jobs[next].job.SubmitTime.After(s.now); next++ {
		j := s.jobs[next]
		if j.preplaced {
			continue
		}
		if j.unplaceable {
			s.acct.unplaceable++
			s.log.Warn("job larger than the fleet; never queued", "job", j.job.ID, "gpus", j.gpus)
			continue
		}
		batch = append(batch, &j.job)
	}
	if len(batch) == 0 {
		return next, nil
	}
	fc, err := s.cfg.Forecaster.Forecast(ctx, batch)
	if err != nil {
		return next, fmt.Errorf("sim: forecasts at %s: %w", s.now.Format(time.RFC3339), err)
	}
	byID := make(map[cluster.JobID]executor.Forecast, len(fc))
	for _, f := range fc {
		byID[f.Job] = f
	}
	for _, j := range s.jobs[first:next] {
		if j.unplaceable || j.preplaced {
			continue
		}
		j.view.Forecast = byID[j.job.ID]
		j.view.QueuedSince = s.now
		if s.cfg.Waits == nil || !j.job.SubmitTime.Before(s.cfg.Start) { // else counted in Config.Waits
			w := s.waits[j.job.Spec.Tenant]
			w.Arrivals++
			s.waits[j.job.Spec.Tenant] = w // its queued time comes with the clock (advance)
		}
		s.enqueue(j)
		s.arrived(j)
		if s.kept != nil {
			s.kept.Arrive(&j.view)
		}
		if j.withdrawn {
			s.ev.push(event{at: j.withdrawAt, kind: evWithdraw, job: j, epoch: j.epoch})
		}
		s.wakeLending()
		if s.cfg.Preemptive || s.free.FreeGPUs() > 0 || j.gpus == 0 || j.job.Spec.Fractional() {
			s.dirty = true
		}
	}
	return next, nil
}

func (s *Simulator) handle(e event) error {
	switch e.kind {
	case evFinish:
		if e.epoch == e.job.epoch {
			return s.complete(e.job)
		}
	case evStop:
		if e.epoch == e.job.epoch {
			return s.stop(e.job)
		}
	case evFail:
		if err := s.fail(e.node); err != nil {
			return err
		}
		s.scheduleFailure()
	case evRepair:
		s.repair(e.node)
	case evWake:
		s.dirty = true
	case evLend:
		return s.tick()
	case evParkDue: // a step, after which the parking review runs
		s.acct.park.dueDone()
	case evWithdraw:
		if e.epoch == e.job.epoch && e.job.qpos >= 0 {
			return s.withdraw(e.job)
		}
	}
	return nil
}

// plan asks the planner and applies its plan.
func (s *Simulator) plan(ctx context.Context) error {
	s.dirty = false
	in := executor.PlanInput{
		Now: s.now, Cluster: s.snap, Free: s.free,
		UsageGPU: s.usage, Waits: s.waits, NodeMTBF: s.cfg.NodeMTBF, PreemptionRate: s.acct.preemptionRate(),
		Unexplained: true, // the replay reads decisions, not their reasons
	}
	s.jobsNow(&in)
	s.caches.warmQueue(s, in.Queue)
	if s.cfg.Carbon != nil {
		in.Carbon = s.cfg.Carbon // the interface stays nil without a series
	}
	hidden := s.hideAsleep()
	p, err := s.cfg.Planner.Plan(ctx, in)
	if err != nil {
		return fmt.Errorf("sim: plan at %s: %w", s.now.Format(time.RFC3339), err)
	}
	s.acct.cycles++
	s.acct.decisions += len(p.Placements) + len(p.Preemptions)
	for _, pr := range p.Preemptions {
		if err := s.preempt(pr); err != nil {
			return err
		}
	}
	for _, pl := range p.Placements {
		if err := s.start(pl); err != nil {
			return err
		}
	}
	again, err := s.wakeNeeded(ctx, in, hidden)
	if err != nil {
		return err
	}
	if len(p.Placements) > 0 {
		s.wakeLending()
	}
	if next := earliest(p.NextReplan, again); !next.IsZero() && !next.Equal(s.wakeAt) {
		s.wakeAt = next
		s.ev.push(event{at: next, kind: evWake})
	}
	return nil
}

// hideAsleep, with Config.WakeLast, takes the parked and the booting
// nodes out of the plan, as the control plane drains the nodes parked or
// being woken, and returns them.
func (s *Simulator) hideAsleep() []hiddenNode {
	if !s.cfg.WakeLast || !s.acct.park.active {
		return nil
	}
	var hidden []hiddenNode
	for i := range s.snap.Nodes {
		booting := s.acct.park.bootUntil[i].After(s.now)
		if s.free.Ready(i) && (booting || s.acct.park.parked(s, i)) {
			hidden = append(hidden, hiddenNode{i: i, state: s.snap.Nodes[i].State, booting: booting})
			s.free.SetReady(i, false)
			s.snap.Nodes[i].State = cluster.NodeDrained
		}
	}
	return hidden
}

// hiddenNode is a node hideAsleep took out of the plan, its state before
// and whether it was booting (else parked).
type hiddenNode struct {
	i       int
	state   cluster.NodeState
	booting bool
}

// wakeNeeded, with Config.WakeLast, once the plan is carried out, wakes
// the hidden parked nodes that the jobs it left waiting need (park.Needed:
// what the GPUs being freed and the booting nodes will not take), keeps up
// the nodes it planned them on, as the control plane does, and gives the
// hidden nodes back to the plan. A woken node boots for WakeTime, out of
// the plan until it is up. It returns when to plan again for a job that
// a parked node would take later (a carbon hold), as the plane's cycles
// would (zero: no need).
func (s *Simulator) wakeNeeded(ctx context.Context, in executor.PlanInput, hidden []hiddenNode) (time.Time, error) {
	if !s.cfg.WakeLast || !s.acct.park.active {
		return time.Time{}, nil
	}
	defer func() {
		for _, h := range hidden {
			s.free.SetReady(h.i, true)
			s.snap.Nodes[h.i].State = h.state
		}
	}()
	var w park.Wakes
	if len(hidden) > 0 { // the plane asks only while nodes are parked or booting
		s.jobsNow(&in)
	}
	if len(hidden) > 0 && len(in.Queue) > 0 { // else nothing waits, and Needed would say so
		need := park.Need{In: in, Nodes: s.snap.Nodes, Tenants: s.snap.Tenants, Asleep: make([]cluster.Node, 0, len(hidden))}
		for _, h := range hidden {
			n := s.snap.Nodes[h.i]
			n.State = h.state
			if h.booting {
				need.Waking = append(need.Waking, n)
			} else {
				need.Asleep = append(need.Asleep, n)
			}
		}
		var err error
		if w, err = park.Needed(ctx, s.cfg.Planner, need); err != nil {
			return time.Time{}, fmt.Errorf("sim: the parked nodes the waiting jobs need at %s: %w", s.now.Format(time.RFC3339), err)
		}
		s.acct.cycles++
		for _, h := range hidden {
			if !h.booting && w.Wake[s.snap.Nodes[h.i].Name] != "" {
				s.acct.park.wake(s, h.i)
			}
		}
	}
	s.acct.park.hold(s, w.Planned)
	return w.NextReplan, nil
}

// earliest is the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// jobsNow brings the running jobs' views up to now and gives in the
// queue (in the policy's order when the simulator keeps it sorted), its
// facts, and the running jobs as they are.
func (s *Simulator) jobsNow(in *executor.PlanInput) {
	s.refreshRunning()
	in.Queue, in.Running, in.QueueSorted, in.Facts, in.Kept = s.queue, s.running, false, s.facts.Facts(s.now), s.kept
	in.QueueParts, in.QueueIndex, in.RunningParts = s.parts, s.index, s.runParts
	if s.sorted != nil {
		s.sorted.Advance(s.now)
		in.Queue = s.sorted.Jobs()
		if s.sorted.Total() { // else the planner orders it
			in.QueueSorted, in.QueueKeys, in.QueueNext = true, s.sorted.Keys(), s.sorted.Next()
		}
	}
}

// refreshRunning brings the running jobs' views up to now.
func (s *Simulator) refreshRunning() {
	now := s.now.UnixNano()
	for k, r := range s.running {
		j := s.runJobs[k]
		if r.Stopping {
			continue
		}
		prog, ck, _, _ := j.seg.atUnixNano(now)
		r.Progress = prog
		r.AttainedGPU = j.view.AttainedGPU + time.Duration(now-r.Started.UnixNano())*time.Duration(max(j.gpus, 1))
		r.WorkSinceCheckpoint = (prog - ck) * time.Duration(max(j.gpus, 1))
	}
}

// scheduleFailure draws the next node failure of the fleet: the fleet fails
// at N/MTBF per hour; the node is drawn at random.
func (s *Simulator) scheduleFailure() {
	if s.cfg.NodeMTBF <= 0 {
		return
	}
	n := len(s.snap.Nodes)
	mean := float64(s.cfg.NodeMTBF) / float64(n)
	gap := time.Duration(math.Max(s.rng.ExpFloat64()*mean, 1))
	s.ev.push(event{at: s.now.Add(gap), kind: evFail, node: s.rng.IntN(n)})
}

func (s *Simulator) queueLen() int {
	if s.sorted != nil {
		return s.sorted.Len()
	}
	return len(s.queue)
}
