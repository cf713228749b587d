package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/prescient-sched/prescient/executor"
)

// Events is a backend's event stream: Emit queues an event and never
// blocks, so a backend may emit under its own locks; Watch hands the
// queued events to one reader, in order. Events emitted before Watch are
// delivered first; those a reader whose context ended did not take stay
// queued for the next (Rewatch). Safe for concurrent use.
type Events struct {
	name string
	max  int
	log  *slog.Logger

	mu      sync.Mutex
	queue   []executor.JobEvent
	watched bool
	notify  chan struct{}
}

// NewEvents makes an empty stream for the backend name (in errors and
// logs). With max above zero at most max events wait for the reader: the
// oldest is dropped, and logged, to make room; zero keeps them all.
func NewEvents(name string, max int, log *slog.Logger) *Events {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Events{name: name, max: max, log: log, notify: make(chan struct{}, 1)}
}

// Emit queues e for the reader.
func (s *Events) Emit(e executor.JobEvent) {
	s.mu.Lock()
	s.queue = append(s.queue, e)
	if s.max > 0 && len(s.queue) > s.max {
		s.queue = s.queue[1:]
		s.log.Error("event queue full: the oldest event was dropped; is the control plane reading Watch?", "backend", s.name, "max_events", s.max)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Queued is how many events wait for the reader.
func (s *Events) Queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Watch streams the events until ctx ends, when the channel is closed. It
// may be called once (again after Rewatch).
func (s *Events) Watch(ctx context.Context) (<-chan executor.JobEvent, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched {
		return nil, fmt.Errorf("%s: %w", s.name, ErrWatched)
	}
	s.watched = true
	out := make(chan executor.JobEvent)
	go s.pump(ctx, out)
	return out, nil
}

// ErrWatched is returned by a second Watch.
var ErrWatched = errors.New("Watch called twice")

// Rewatch lets Watch be called again (a control plane that restarts in the
// same process, in tests); events not yet delivered stay queued.
func (s *Events) Rewatch() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watched = false
}

// pump hands the queued events to out in order; what it could not hand
// over when ctx ends goes back to the front of the queue.
func (s *Events) pump(ctx context.Context, out chan<- executor.JobEvent) {
	defer close(out)
	for {
		s.mu.Lock()
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for i, e := range batch {
			select {
			case out <- e:
			case <-ctx.Done():
				s.mu.Lock()
				s.queue = append(slices.Clone(batch[i:]), s.queue...)
				s.mu.Unlock()
				return
			}
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return
		}
	}
}
