package live

import (
	"sync"
	"time"
)

// Task is a concern's work beside the plan loop, so that a slow telemetry
// store or simulation never delays a plan: at most one run at a time,
// started at most every so often, that Wait waits for. Its zero value is
// ready; safe for concurrent use.
type Task struct {
	mu      sync.Mutex
	running bool
	last    time.Time // when the last run started
	wg      sync.WaitGroup
}

// Due starts a run at now when none runs and every has passed since the
// last one started (or none did), and reports whether it did. The caller
// then hands the run to Go, or ends it with Skip.
func (t *Task) Due(now time.Time, every time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running || !t.last.IsZero() && now.Sub(t.last) < every {
		return false
	}
	t.running, t.last = true, now
	return true
}

// Go runs fn beside the loop as the run Due started; it ends when fn
// returns.
func (t *Task) Go(fn func()) {
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.Skip()
		fn()
	}()
}

// Skip ends the run Due started, or Go's once its work is done.
func (t *Task) Skip() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running = false
}

// Wait waits for the run under way.
func (t *Task) Wait() { t.wg.Wait() }
