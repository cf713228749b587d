package sim

import "time"

// segment is one attempt of a job, from its start: the job resumes from
// saved progress and, with an interval τ > 0, pauses after every τ of work
// to write a checkpoint that takes cost.
type segment struct {
	start    time.Time
	saved    time.Duration
	interval time.Duration
	cost     time.Duration
	// slow is the wall time per unit of work (a slower GPU model's or a
	// power cap's slowdown; below 1 on a model faster for the job); 0 or 1
	// is the trace's speed. Checkpoints take cost whatever the cap.
	slow float64
}

// wall is the wall time d of work takes.
func (s segment) wall(d time.Duration) time.Duration {
	if s.slow <= 0 || s.slow == 1 {
		return d
	}
	return time.Duration(float64(d) * s.slow)
}

// work is the work done in wall time d.
func (s segment) work(d time.Duration) time.Duration {
	if s.slow <= 0 || s.slow == 1 {
		return d
	}
	return time.Duration(float64(d) / s.slow)
}

// at returns, at time t in the segment, the job's progress, the progress of
// its last completed checkpoint, the checkpoints completed, and the time
// spent on one still being written.
func (s *segment) at(t time.Time) (progress, checkpointed time.Duration, done int, writing time.Duration) {
	return s.atUnixNano(t.UnixNano())
}

// atUnixNano is at for a time in Unix nanoseconds: a replay brings every
// running job up to the clock in every cycle, and the difference of two
// such numbers is cheaper than Time.Sub (the same for any time of these
// centuries).
func (s *segment) atUnixNano(t int64) (progress, checkpointed time.Duration, done int, writing time.Duration) {
	e := max(time.Duration(t-s.start.UnixNano()), 0)
	if s.interval <= 0 {
		return s.saved + s.work(e), s.saved, 0, 0
	}
	compute := s.wall(s.interval)
	period := compute + s.cost
	k := e / period
	r := e - k*period
	checkpointed = s.saved + k*s.interval
	if r > compute {
		writing = r - compute
	}
	return checkpointed + min(s.work(r), s.interval), checkpointed, int(k), writing
}

// finish returns when a job needing work more progress ends, and the
// checkpoints it writes on the way (none at the very end).
func (s segment) finish(work time.Duration) (time.Time, int) {
	w := max(work-s.saved, 0)
	if s.interval <= 0 || w == 0 {
		return s.start.Add(s.wall(w)), 0
	}
	n := (w - 1) / s.interval
	return s.start.Add(n*(s.wall(s.interval)+s.cost) + s.wall(w-n*s.interval)), int(n)
}
