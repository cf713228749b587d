package parking

import (
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor/park"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// setParked moves a node from power state from to to (Parked or Waking)
// at now, in the store first, tells the webhooks and runs the program.
func (p *Parking) setParked(ctx context.Context, node cluster.Node, from, to park.State, now time.Time, msg, program string) bool {
	p.mu.Lock()
	cur := p.parked[node.Name]
	p.mu.Unlock()
	state := park.Awake
	if cur != nil {
		state = cur.State
	}
	if state != from {
		return false // it moved since the decision
	}
	// A cordon this call puts on is taken off again if the record fails;
	// the advisor changes no mark.
	cordoned := false
	if to == park.Parked && p.d.Cordoner != nil && p.d.Mode() == service.ModeAutopilot {
		placed, err := p.d.Cordoner.Cordon(ctx, node.Name)
		if err != nil && placed {
			p.loop.notParked[node.Name] = true // a mark left on: settleCordons takes it off
		}
		switch {
		case err != nil && from == park.Waking:
			// A node whose wake failed is down, cordoned or not.
			p.log.Warn("parking: the node whose wake failed is not cordoned", "node", node.Name, "error", err)
		case err != nil:
			p.log.Error("parking: the node is not cordoned, so not parked; it is tried again later", "node", node.Name,
				"after", p.cfg.IdleAfter, "error", err)
			p.loop.hold[node.Name] = now.Add(p.cfg.IdleAfter)
			return false
		}
		cordoned = placed
	}
	var wakeAfter time.Time
	if from == park.Waking && to == park.Parked {
		wakeAfter = now.Add(p.cfg.WakeTimeout) // a failed wake: others are woken meanwhile
	}
	if err := p.d.Store.PutParked(ctx, store.ParkedNode{State: to.String(), Since: now, Node: node, WakeAfter: wakeAfter}); err != nil {
		p.log.Error("parking: not recorded", "node", node.Name, "state", to, "error", err)
		if cordoned {
			if err := p.d.Cordoner.Uncordon(ctx, node.Name); err != nil {
				p.loop.notParked[node.Name] = true // its mark is this plane's: settleCordons takes it off
				p.log.Warn("parking: the node not parked is not uncordoned yet", "node", node.Name, "error", err)
			}
		}
		return false
	}
	p.mu.Lock()
	next := &parkedNode{Record: park.Record{State: to, Since: now, Suspending: to == park.Parked && program != "", WakeAfter: wakeAfter}, node: node}
	if cur != nil {
		next.SeenDown = cur.SeenDown
	}
	p.parked[node.Name] = next
	p.mu.Unlock()
	if to == park.Parked {
		delete(p.loop.notParked, node.Name)
	} else {
		p.loop.notParked[node.Name] = true
	}
	p.d.Changed()
	if from == park.Waking {
		p.log.Error("parking: "+msg, "node", node.Name)
	} else {
		p.log.Info("parking: "+msg, "node", node.Name)
	}
	if to == park.Waking && p.d.Cordoner != nil {
		if err := p.d.Cordoner.Uncordon(ctx, node.Name); err != nil {
			p.log.Warn("parking: the woken node is not uncordoned yet", "node", node.Name, "error", err)
		}
	}
	p.notify(ctx, "node_"+to.String(), node.Name, now, msg)
	if program != "" {
		p.runPowerProgram(ctx, program, powerRun{node: node.Name, state: to, since: now})
	}
	return true
}

// runPowerProgram runs Suspend or Resume for a node beside the plan loop,
// to its end even when the plane stops: at most powerProgramTimeout, then
// its process group is killed. settleParked hears how it ended.
func (p *Parking) runPowerProgram(ctx context.Context, program string, run powerRun) {
	ctx = context.WithoutCancel(ctx)
	p.d.Background.Add(1)
	go func() {
		defer p.d.Background.Done()
		ctx, cancel := context.WithTimeout(ctx, powerProgramTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, program, run.node)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = powerProgramWait
		out, err := cmd.CombinedOutput()
		if errors.Is(err, exec.ErrWaitDelay) {
			err = nil // it exited well; a child it left behind kept its output open
		}
		if err != nil {
			run.err = err
			p.log.Error("parking: the power program failed", "program", program, "node", run.node, "state", run.state,
				"error", err, "output", string(out[max(len(out)-2000, 0):]))
		}
		p.mu.Lock()
		p.powerRuns = append(p.powerRuns, run)
		p.mu.Unlock()
		if err != nil {
			p.d.Poke()
		}
	}()
}

// notify tells the webhooks of a node's change.
func (p *Parking) notify(ctx context.Context, typ, node string, now time.Time, msg string) {
	if p.d.Notifier != nil {
		p.d.Notifier.Notify(ctx, service.LifecycleEvent{Type: typ, Time: now, Node: node, Message: msg})
	}
}
