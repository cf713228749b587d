package training

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Every runs once now and then every interval until ctx ends. A failed run
// is logged and the schedule goes on; it returns nil when ctx ends.
func Every(ctx context.Context, interval time.Duration, log *slog.Logger, once func(context.Context) error) error {
	log = logger(log)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		start := time.Now()
		if err := once(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error("retraining failed; next run on schedule", "err", err, "next_in", interval)
		} else if err == nil {
			log.Info("retraining done", "took", time.Since(start).Round(time.Millisecond), "next_in", interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
