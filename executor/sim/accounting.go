package sim

import (
	"math"
	"time"

	"github.com/prescient-sched/prescient/cluster"
)

// accounting integrates what the replay measures as time passes.
type accounting struct {
	start, last   time.Time
	allocMilli    int
	allocGPUs     float64 // integral of allocated GPUs, GPU-seconds
	idleW, extraW float64 // idle draw of ready GPUs; extra draw of allocated shares
	energyJ       float64
	co2g          float64 // grams of CO2 with Config.Carbon
	running       int
	jobSeconds    float64

	finished, unplaceable int
	withdrawn             int // left the queue as the trace's users cancelled them
	preemptions, failures int
	capped                int   // starts under a power cap
	savedBytes            int64 // dataset bytes not fetched: starts next to a warm copy
	lossyStops            int   // preemptions whose checkpoint did not land
	cycles, decisions     int
	lostGPU               time.Duration
	checkpointGPU         time.Duration
	lastEnd               time.Time
	queue                 []QueuePoint
	park                  parking // idle nodes parked after Config.ParkIdleAfter (power.go)
}

// QueuePoint is the queue length at one time.
type QueuePoint struct {
	Time   time.Time
	Queued int
}

func (a *accounting) init(s *Simulator) {
	a.start, a.last = s.now, s.now
	for i := range s.snap.Nodes {
		a.nodeState(s, i, true)
	}
	a.park.init(s, a)
}

// advance moves the simulator's clock to t, integrating up to it.
func (s *Simulator) advance(t time.Time) {
	a := &s.acct
	if t.Before(s.now) {
		t = s.now
	}
	dt := t.Sub(a.last).Seconds()
	a.allocGPUs += float64(a.allocMilli) / cluster.MilliGPU * dt
	a.energyJ += (a.idleW + a.extraW) * dt
	a.co2g += s.gramsOf(a.idleW+a.extraW, a.last, t)
	a.jobSeconds += float64(a.running) * dt
	if dt > 0 {
		decay := math.Exp2(-dt / s.cfg.UsageHalfLife.Seconds())
		for tenant, u := range s.usage {
			s.usage[tenant] = time.Duration(float64(u) * decay)
		}
		for tenant, w := range s.waits {
			s.waits[tenant] = w.Advance(t.Sub(a.last), s.cfg.WaitHalfLife, s.queuedN[tenant])
		}
		for tenant, g := range s.held {
			s.usage[tenant] += time.Duration(float64(g) * dt * float64(time.Second))
		}
	}
	a.last, s.now = t, t
}

func (a *accounting) allocate(s *Simulator, j *simJob) {
	for _, al := range j.run.Allocations {
		a.allocMilli += al.Milli
		a.extraW += s.extraW(al, j.powerScale())
		a.park.jobOn(s, a, al.GPU.Node, 1)
	}
	a.running++
	s.held[j.job.Spec.Tenant] += j.gpus
	s.peak[j.job.Spec.Tenant] = max(s.peak[j.job.Spec.Tenant], s.held[j.job.Spec.Tenant])
}

func (a *accounting) release(s *Simulator, j *simJob) {
	for _, al := range j.run.Allocations {
		a.allocMilli -= al.Milli
		a.extraW -= s.extraW(al, j.powerScale())
		a.park.jobOn(s, a, al.GPU.Node, -1)
	}
	a.running--
	s.held[j.job.Spec.Tenant] -= j.gpus
}

// powerScale is the job's busy draw over the uncapped one.
func (j *simJob) powerScale() float64 {
	if j.capPower > 0 {
		return j.capPower
	}
	return 1
}

// extraW is what a share draws above its GPU's idle power, busy at scale
// of the GPU's busy draw (a power cap).
func (s *Simulator) extraW(al cluster.Allocation, scale float64) float64 {
	n, _ := s.snap.Node(al.GPU.Node)
	pm := s.cfg.Power(n.GPUs[al.GPU.Index])
	return (pm.BusyW*scale - pm.IdleW) * float64(al.Milli) / cluster.MilliGPU
}

// nodeState adds (up) or removes a node's idle draw: its base power and
// its GPUs' idle power.
func (a *accounting) nodeState(s *Simulator, i int, up bool) {
	if a.park.nodeState(s, a, i, up) {
		return
	}
	w := s.cfg.NodePower(s.snap.Nodes[i]).BaseW
	for _, g := range s.snap.Nodes[i].GPUs {
		w += s.cfg.Power(g).IdleW
	}
	if up {
		a.idleW += w
	} else {
		a.idleW -= w
	}
}

// ended counts the jobs the replay is done with: finished, withdrawn, or
// never to be placed.
func (a *accounting) ended() int { return a.finished + a.withdrawn + a.unplaceable }

func (a *accounting) finish(j *simJob) {
	a.finished++
	if j.job.EndTime.After(a.lastEnd) {
		a.lastEnd = j.job.EndTime
	}
}

// preemptionRate is the preemptions that lost work (their checkpoint did
// not land in the grace period) per running job-hour so far: the rate that
// periodic checkpoints guard against. Preemptions that checkpoint on
// request lose nothing and do not count.
func (a *accounting) preemptionRate() float64 {
	if a.jobSeconds < 3600 {
		return 0
	}
	return float64(a.lossyStops) / (a.jobSeconds / 3600)
}

func (a *accounting) sampleQueue(t time.Time, n int) {
	if k := len(a.queue); k > 0 && t.Sub(a.queue[k-1].Time) < 10*time.Minute {
		return
	}
	a.queue = append(a.queue, QueuePoint{Time: t, Queued: n})
}
