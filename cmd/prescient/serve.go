package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/store"
	"github.com/prescient-sched/prescient/training"
)

type serveOptions struct {
	addr            string
	dbPath          string
	shutdownTimeout time.Duration
	retrainEvery    time.Duration
	models          string
}

func newServeCmd(g *globals) *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane",
		Long: `Run the control plane on the embedded default: job state in one SQLite file,
no InfluxDB needed. It answers /healthz (the process is alive) and /readyz (the
store answers). With --retrain-every and --models it retrains the forecasting
models from the finished jobs in the store on that schedule and publishes what
passes the gate. The scheduling modes, the /v1 API and the backends arrive with
the control-plane issue.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on")
	f.StringVar(&o.dbPath, "db", "prescient.db", "SQLite file holding the control plane's state (created if missing)")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGTERM")
	f.DurationVar(&o.retrainEvery, "retrain-every", 0, "retrain the forecasting models from the job store on this schedule (e.g. 6h); 0 never")
	f.StringVar(&o.models, "models", "", "model registry directory that --retrain-every publishes to")
	return cmd
}

// runServe opens the store, serves HTTP until ctx ends, then shuts down.
func runServe(ctx context.Context, g *globals, o serveOptions) error {
	log := g.logger.With("component", "serve")

	// 1. Open the durable state; nothing is served before it is there.
	st, err := store.Open(ctx, o.dbPath, store.WithLogger(g.logger))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer st.Close()
	wait, err := startRetraining(ctx, g, o, st)
	if err != nil {
		return err
	}
	defer wait() // before the store closes

	// 2. Bind the listener first so that a taken port fails loudly at start.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("serve: --addr %s: %w", o.addr, err)
	}
	srv := &http.Server{
		Handler: api.New(api.Config{
			Logger:  g.logger,
			Version: version,
			Checks:  []api.ReadyCheck{{Name: "store", Check: st.Ping}},
		}).Handler(),
		ReadHeaderTimeout: 10 * time.Second,
	}

	// 3. Serve until SIGINT/SIGTERM, then let in-flight requests finish.
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("control plane serving", "addr", ln.Addr().String(), "db", o.dbPath)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	return nil
}

// startRetraining runs the retraining schedule in the background when
// --retrain-every is set: finished jobs from the store, trained, gated and
// published to --models. wait stops the schedule (a run in progress ends
// at its next check of the context) and returns once it has stopped.
func startRetraining(ctx context.Context, g *globals, o serveOptions, st *store.Store) (wait func(), err error) {
	if o.retrainEvery < 0 {
		return nil, fmt.Errorf("serve: --retrain-every %s is negative (0 turns retraining off)", o.retrainEvery)
	}
	if o.retrainEvery == 0 {
		return func() {}, nil
	}
	if o.models == "" {
		return nil, fmt.Errorf("serve: --retrain-every needs --models (the registry directory)")
	}
	reg := training.Registry{Dir: o.models}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = training.Every(ctx, o.retrainEvery, g.logger, func(ctx context.Context) error {
			return training.Retrain(ctx, st, reg, training.Config{Seed: 1, Logger: g.logger})
		})
	}()
	return func() { cancel(); <-done }, nil
}
