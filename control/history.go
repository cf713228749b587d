package control

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/executor"
	"github.com/prescient-sched/prescient/service"
	"github.com/prescient-sched/prescient/store"
)

// minEnergyCoverage is how much of an attempt a GPU's power telemetry must
// cover for its energy to be given: the mean power of the covered windows
// stands for the whole attempt.
const minEnergyCoverage = 0.5

// history fills st's attempts, run time, GPU-hours and energy from the
// job's events; a running attempt counts to now. Energy that cannot be
// read leaves the attempt's EnergyKWh nil with the reason, never an error.
func (p *Plane) history(ctx context.Context, st *service.JobStatus, evs []store.Event, now time.Time) error {
	attempts, err := store.Attempts(evs)
	if err != nil {
		return err
	}
	if len(attempts) == 0 {
		return nil
	}
	uuids := p.gpuUUIDs()
	total, known := 0.0, true
	for _, a := range attempts {
		end := a.End
		if a.Running() {
			end = now
		}
		ja := service.JobAttempt{Attempt: a.Number, StartTime: a.Start.UTC(), EndedBy: string(a.EndedBy), Message: a.Message,
			RunS: max(end.Sub(a.Start), 0).Seconds()}
		if !a.Running() {
			ja.EndTime = timePtr(a.End)
		}
		milli := 0
		for _, al := range a.Allocations {
			ja.Allocations = append(ja.Allocations, service.GPUShare{Node: al.GPU.Node, GPU: al.GPU.Index, Milli: al.Milli})
			milli += al.Milli
		}
		ja.GPUHours = ja.RunS / 3600 * float64(milli) / cluster.MilliGPU
		kwh, why := p.attemptEnergy(ctx, a, end, uuids)
		if why == "" {
			ja.EnergyKWh, total = &kwh, total+kwh
		} else {
			ja.EnergyUnavailable, known = why, false
		}
		st.RunS += ja.RunS
		st.GPUHours += ja.GPUHours
		st.History = append(st.History, ja)
	}
	if known {
		st.EnergyKWh = &total
	}
	return nil
}

// logWait bounds how long JobLog waits for the nodes' answers.
const logWait = 10 * time.Second

// JobLog implements Service: it asks the backend for the attempt's log on
// each node the attempt ran on.
func (p *Plane) JobLog(ctx context.Context, id cluster.JobID, attempt, maxBytes int) (service.JobLog, error) {
	if _, err := p.getJob(ctx, id); err != nil {
		return service.JobLog{}, err
	}
	evs, err := p.cfg.Store.Events(ctx, id)
	if err != nil {
		return service.JobLog{}, err
	}
	attempts, err := store.Attempts(evs)
	if err != nil {
		return service.JobLog{}, fmt.Errorf("job %s: %w", id, err)
	}
	a, ok := findAttempt(attempts, attempt)
	switch {
	case !ok && attempt == 0:
		return service.JobLog{}, fmt.Errorf("job %s has not started: it has no log: %w", id, service.ErrNotFound)
	case !ok:
		return service.JobLog{}, fmt.Errorf("job %s has no attempt %d: %w", id, attempt, service.ErrNotFound)
	}
	out := service.JobLog{Job: id, Attempt: a.Number}
	var nodes []string
	for _, al := range a.Allocations {
		if !slices.Contains(nodes, al.GPU.Node) {
			nodes = append(nodes, al.GPU.Node)
		}
	}
	if len(nodes) == 0 {
		out.Nodes = []service.NodeLog{{Unavailable: fmt.Sprintf("where attempt %d ran was not recorded (an older release started it)", a.Number)}}
		return out, nil
	}
	lr, ok := p.cfg.Backend.(executor.LogReader)
	if !ok {
		for _, n := range nodes {
			out.Nodes = append(out.Nodes, service.NodeLog{Node: n, Unavailable: "this control plane's backend keeps no job logs"})
		}
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, logWait)
	defer cancel()
	for _, t := range lr.JobLog(ctx, id, a.Number, nodes, min(max(maxBytes, 1), service.MaxLogBytes)) {
		out.Nodes = append(out.Nodes, service.NodeLog{Node: t.Node, Text: t.Text, Truncated: t.Truncated, Unavailable: t.Unavailable})
	}
	return out, nil
}

// findAttempt is attempt number n of attempts, or the newest for n 0.
func findAttempt(attempts []store.Attempt, n int) (store.Attempt, bool) {
	if n == 0 && len(attempts) > 0 {
		return attempts[len(attempts)-1], true
	}
	for _, a := range attempts {
		if a.Number == n {
			return a, true
		}
	}
	return store.Attempt{}, false
}

// gpuUUIDs maps the fleet's GPUs to their UUIDs, where known.
func (p *Plane) gpuUUIDs() map[cluster.GPURef]string {
	out := map[cluster.GPURef]string{}
	for _, n := range p.cfg.Nodes.Nodes() {
		for _, g := range n.GPUs {
			if g.UUID != "" {
				out[cluster.GPURef{Node: n.Name, Index: g.Index}] = g.UUID
			}
		}
	}
	for ref, u := range p.idleJobs.UUIDsByProcess() { // Kubernetes: the GPUs its jobs' processes ran on
		if _, ok := out[ref]; !ok {
			out[ref] = u
		}
	}
	return out
}

// attemptEnergy is the energy of attempt a's GPU shares until end from
// the power telemetry, in kWh, or why it is unavailable.
func (p *Plane) attemptEnergy(ctx context.Context, a store.Attempt, end time.Time, uuids map[cluster.GPURef]string) (float64, string) {
	switch {
	case len(a.Allocations) == 0:
		return 0, "the attempt's GPUs were not recorded"
	case p.cfg.Telemetry == nil:
		return 0, "no GPU telemetry is read"
	case !end.After(a.Start):
		return 0, ""
	}
	shares := map[string]int{}
	var missing []string
	for _, al := range a.Allocations {
		u, ok := uuids[al.GPU]
		if !ok {
			missing = append(missing, al.GPU.String())
			continue
		}
		shares[u] += al.Milli
	}
	if len(missing) > 0 {
		return 0, fmt.Sprintf("the UUID of %s is not known (node gone?)", strings.Join(missing, ", "))
	}
	q := collector.SeriesQuery{Field: "power_w", GPUs: slices.Sorted(maps.Keys(shares)), Start: a.Start, End: end,
		Step: max(time.Minute, end.Sub(a.Start)/500).Truncate(time.Second), Agg: "mean"}
	series, err := p.cfg.Telemetry.Query(ctx, q)
	if err != nil {
		p.log.Warn("job history: power telemetry not read", "job", a.Allocations[0].Job, "attempt", a.Number, "error", err)
		return 0, "power telemetry not read: " + err.Error()
	}
	return energyKWh(series, shares, q)
}

// energyKWh integrates the power series of q's GPUs, each weighted by its
// share in thousandths: a GPU's mean power over the windows with samples
// times the query's span. A GPU whose windows cover under
// minEnergyCoverage of the span makes the energy unavailable.
func energyKWh(series []collector.Series, shares map[string]int, q collector.SeriesQuery) (float64, string) {
	span := q.End.Sub(q.Start)
	byGPU := map[string]collector.Series{}
	for _, s := range series {
		byGPU[s.GPU] = s
	}
	joules := 0.0
	for _, u := range slices.Sorted(maps.Keys(shares)) {
		s, ok := byGPU[u]
		if !ok || len(s.Points) == 0 {
			return 0, fmt.Sprintf("no power telemetry from GPU %s during the attempt", u)
		}
		var covered time.Duration
		wattSeconds := 0.0
		for _, pt := range s.Points {
			from, to := pt.Time, pt.Time.Truncate(q.Step).Add(q.Step) // windows are aligned to Step
			if from.Before(q.Start) {
				from = q.Start
			}
			if to.After(q.End) {
				to = q.End
			}
			if d := to.Sub(from); d > 0 {
				covered += d
				wattSeconds += pt.Value * d.Seconds()
			}
		}
		if covered <= 0 || float64(covered) < minEnergyCoverage*float64(span) {
			return 0, fmt.Sprintf("power telemetry of GPU %s covers %.0f%% of the attempt", u, 100*float64(covered)/float64(span))
		}
		meanW := wattSeconds / covered.Seconds()
		joules += meanW * span.Seconds() * float64(shares[u]) / cluster.MilliGPU
	}
	return joules / 3.6e6, ""
}
