package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/datasets"
	"github.com/prescient-sched/prescient/internal/watchfile"
	"github.com/prescient-sched/prescient/models"
	"github.com/prescient-sched/prescient/predictor"
	"github.com/prescient-sched/prescient/slurm"
	"github.com/prescient-sched/prescient/training"
)

type slurmOptions struct {
	site           slurmSite
	models, listen string
	tokens         string
	every, warmup  time.Duration
	once           bool
	cfg            slurm.Config
	carbon         string
	carbonWait     time.Duration
}

// slurmSite is where a prescient slurm command finds the cluster: its
// commands, or slurmrestd with the commands for what it cannot do, and
// its state folder: the flags slurm, slurm restore and (all but the
// state) slurm guard share.
type slurmSite struct {
	conf, bin, state string
	rest             restFlags
}

// restFlags say how to reach slurmrestd.
type restFlags struct{ url, tokenFile, user, version string }

func (s *slurmSite) register(f *pflag.FlagSet, stateHelp string) {
	s.registerCluster(f)
	f.StringVar(&s.state, "state", ".run/slurm", stateHelp)
}

// registerCluster registers how to reach the cluster, for a command that
// keeps no state (slurm guard).
func (s *slurmSite) registerCluster(f *pflag.FlagSet) {
	f.StringVar(&s.conf, "slurm-conf", "", "slurm.conf for the Slurm commands (SLURM_CONF; default theirs)")
	f.StringVar(&s.bin, "slurm-bin", "", "folder of the Slurm commands (default: PATH)")
	f.StringVar(&s.rest.url, "slurmrestd", "", "slurmrestd's address (http://host:6820): read and change the cluster through it, and through the commands only what it cannot do")
	f.StringVar(&s.rest.tokenFile, "slurmrestd-token-file", "", "file holding slurmrestd's JSON Web Token, read again at each request (default: env SLURM_JWT)")
	f.StringVar(&s.rest.user, "slurmrestd-user", "", "the user the token is for (X-SLURM-USER-NAME; default: the token's)")
	f.StringVar(&s.rest.version, "slurmrestd-version", "", "slurmrestd data parser version to speak: v0.0.38, or v0.0.40 to v0.0.43 (default: the newest it answers)")
}

// runner is a Runner over the site's cluster and state.
func (s *slurmSite) runner(log *slog.Logger) (*slurm.Runner, error) {
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	return &slurm.Runner{Client: c, Dir: s.state, Log: log.With("component", "slurm")}, nil
}

// commands runs the site's commands.
func (s *slurmSite) commands() *slurm.CLI { return &slurm.CLI{Conf: s.conf, Bin: s.bin} }

// client is slurmrestd with the commands beside it, or the commands.
func (s *slurmSite) client() (slurm.Client, error) {
	if s.rest.url == "" {
		if s.rest.tokenFile != "" || s.rest.user != "" || s.rest.version != "" {
			return nil, errors.New("--slurmrestd-token-file, --slurmrestd-user and --slurmrestd-version need --slurmrestd")
		}
		return s.commands(), nil
	}
	if u, err := url.Parse(s.rest.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--slurmrestd %q: want http://host:port or https://host:port", s.rest.url)
	}
	token := slurm.TokenFile(s.rest.tokenFile)
	if s.rest.tokenFile == "" {
		jwt := os.Getenv("SLURM_JWT")
		if jwt == "" {
			return nil, errors.New("--slurmrestd needs a token: --slurmrestd-token-file FILE or env SLURM_JWT (scontrol token lifespan=... makes one)")
		}
		token = func() (string, error) { return jwt, nil }
	}
	return &slurm.REST{URL: s.rest.url, User: s.rest.user, Token: token, Version: s.rest.version, Commands: s.commands()}, nil
}

// needCommands fails when the levers cfg pulls include one that
// slurmrestd cannot pull and the site's commands are not installed
// where --slurm-bin says, rather than failing at every change.
func (s *slurmSite) needCommands(ctx context.Context, c slurm.Client, cfg slurm.Config) error {
	rest, ok := c.(*slurm.REST)
	if !ok {
		return nil
	}
	lacks, err := rest.LacksFor(ctx, cfg)
	if err != nil || len(lacks) == 0 {
		return err
	}
	scontrol := "scontrol"
	if s.bin != "" {
		scontrol = filepath.Join(s.bin, "scontrol")
	}
	if _, err := exec.LookPath(scontrol); err != nil {
		return fmt.Errorf("slurmrestd cannot read or change %s, which this configuration needs, and %s is not installed: %w",
			strings.Join(lacks, " or "), scontrol, err)
	}
	return nil
}

func newSlurmCmd(g *globals) *cobra.Command {
	var o slurmOptions
	cmd := &cobra.Command{
		Use:   "slurm",
		Short: "Advise a Slurm cluster on time limits and start times, and pull its levers on autopilot",
		Long: `Reads a live Slurm cluster through its commands (squeue, sinfo or scontrol, sacct, all
with --json; Slurm 22.05 and later) or through slurmrestd (--slurmrestd, with a JSON Web
Token; the commands do what its version cannot), forecasts each pending and running job's run time
with the duration models of --models (train them on the site's accounting:
prescient train --target duration --trace slurm:sacct.json), and every --every:

  - predicts each pending job's start and end, and recommends a time limit (the
    time-limit policy of evaluate --target limit, calibrated on the jobs that ended);
  - appends the advice to each pending job's AdminComment ("[prescient: ...]",
    replacing its own earlier note and nothing else), unless --comment=false;
  - with --autopilot: lowers pending jobs' limits to the recommendation in
    --partitions (never below --floor, never above the user's own), gives a lowered
    job its own limit back when it runs near the lowered one; with
    --order-partitions sets pending jobs' Nice so that Slurm's age factor orders
    them by submit time plus their estimate (the headstart-backfill policy of
    simulate; needs PriorityType=priority/multifactor with PriorityWeightAge); with
    --hold-qos and --carbon holds pending jobs of those QOS (scontrol hold) while
    power at least 20% cleaner comes within --carbon-wait of their submission, and
    releases them when it has come (simulate's --carbon-wait); and with
    --park-idle-after powers idle nodes down (POWER_DOWN_ASAP) while nothing pends
    in their partitions and up (POWER_UP) when work comes, through the site's
    SuspendProgram and ResumeProgram.

Every change is an event in --state/events.jsonl; what it changed is kept in
--state/state.json, so a restarted Prescient picks up where it was. Turning
autopilot off restores the users' limits and Nice values, releases the jobs it held and
wakes the nodes it parked; so does
stopping (SIGINT or SIGTERM). A Prescient killed outright restores them when it
next starts without --autopilot, or when "prescient slurm restore --stale-after D"
(from cron or a timer) finds it gone for longer than D. Changing other users' jobs
needs a Slurm operator
(sacctmgr modify user NAME set adminlevel=operator) or root.

With --listen it serves a page of the advice and the latest changes at /, the same as
JSON (GET /v1/slurm/advice, /v1/slurm/events, /v1/slurm/state) and Prometheus metrics
at /metrics (cycles, changes by kind and result, lowered jobs, parked nodes), read-only.
With --tokens (serve's tokens file, a tenant being a Slurm account) the JSON takes a
bearer token: an admin token reads everything, a viewer or submitter token the advice
of its account's jobs. Without --tokens, --listen must be a loopback address.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSlurm(cmd.Context(), g, o) },
	}
	f := cmd.Flags()
	o.site.register(f, "folder for state.json and events.jsonl")
	f.StringVar(&o.models, "models", "", "model registry with a duration model (required)")
	f.StringVar(&o.listen, "listen", "", "address to serve the advice on (default: none)")
	f.StringVar(&o.tokens, "tokens", "", "YAML file of bearer tokens (serve's): who may read the advice served on --listen")
	f.DurationVar(&o.every, "every", time.Minute, "time between cycles")
	f.DurationVar(&o.warmup, "warmup", 14*24*time.Hour, "accounting read at start to calibrate the limits")
	f.BoolVar(&o.once, "once", false, "run one cycle and exit (restoring nothing)")
	f.BoolVar(&o.cfg.Comment, "comment", true, "append the advice to pending jobs' AdminComment")
	f.BoolVar(&o.cfg.Autopilot, "autopilot", false, "change limits, Nice values and holds, and park nodes (off: advise, and undo earlier changes)")
	f.StringSliceVar(&o.cfg.Partitions, "partitions", nil, "partitions whose pending jobs' limits autopilot may lower")
	f.DurationVar(&o.cfg.Floor, "floor", 10*time.Minute, "the least limit autopilot sets")
	f.StringSliceVar(&o.cfg.Order, "order-partitions", nil, "partitions whose pending jobs autopilot orders through Nice, by submit time plus estimate")
	f.StringSliceVar(&o.cfg.HoldQOS, "hold-qos", nil, "QOS of deferrable jobs autopilot may hold for cleaner power (with --carbon)")
	f.StringVar(&o.carbon, "carbon", "", "CSV of time,gco2_per_kwh: the grid's carbon intensity, forecast ahead (read again when it changes)")
	f.DurationVar(&o.carbonWait, "carbon-wait", 6*time.Hour, "the longest a held job waits after its submission")
	f.DurationVar(&o.cfg.ParkIdleAfter, "park-idle-after", 0, "power down a node idle this long with nothing pending in its partitions (0: never)")
	f.StringSliceVar(&o.cfg.ParkPartitions, "park-partitions", nil, "partitions whose nodes may be parked (default: all)")
	cmd.AddCommand(newSlurmQueueCmd(g), newSlurmRestoreCmd(g), newSlurmGuardCmd(g))
	return cmd
}

func newSlurmRestoreCmd(g *globals) *cobra.Command {
	var (
		site  slurmSite
		after time.Duration
	)
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Undo what a stopped prescient slurm changed, once it has been gone long enough",
		Long: `The watchdog for a prescient slurm that was killed and not started again: when no
prescient slurm holds --state and its last cycle ended more than --stale-after ago, it
gives every lowered job still pending or running its user's limit back, every ordered
one its user's Nice, releases the jobs it held, and wakes the nodes it parked, recording each change in --state/events.jsonl. Otherwise it does
nothing. Run it from cron or a systemd timer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if after < 0 {
				return fmt.Errorf("--stale-after %s: want 0 or more", after)
			}
			r, err := site.runner(g.logger)
			if err != nil {
				return err
			}
			done, err := r.RestoreIfStale(cmd.Context(), after)
			if err != nil {
				return err
			}
			if done {
				fmt.Fprintln(cmd.OutOrStdout(), "restored: limits, Nice values, held jobs and parked nodes")
			} else {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to do: prescient slurm runs, or stopped less than --stale-after ago")
			}
			return nil
		},
	}
	f := cmd.Flags()
	site.register(f, "the state folder of the prescient slurm to watch")
	f.DurationVar(&after, "stale-after", 10*time.Minute, "how long it must have been gone")
	return cmd
}

func newSlurmGuardCmd(g *globals) *cobra.Command {
	var site slurmSite
	cmd := &cobra.Command{
		Use:   "guard",
		Short: "Give running jobs their users' limits back near a lowered one, and release expired holds, from Slurm alone",
		Long: `The guard for a prescient slurm that is gone with its host: when autopilot lowers a
job's limit it marks the job's AdminComment with the user's limit
("[prescient-user-limit: 120m]"). The guard reads the jobs through squeue and gives
each running job whose limit is below its mark, and that has run to within two
minutes (or a tenth) of it, the marked limit back, as prescient slurm itself does. It also
releases each job held by an operator whose hold's mark ("[prescient-held-until: ...]")
is more than 15 minutes past, and takes the mark off.
It needs no state folder and is harmless beside a running prescient slurm. Run it every
minute from cron or scrontab on any host with Slurm's commands, as a Slurm operator.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := site.client()
			if err != nil {
				return err
			}
			done, err := slurm.RunGuard(cmd.Context(), c, time.Now(), g.logger.With("component", "slurm"))
			if err == nil || len(done) > 0 { // not when the jobs could not be read
				released := 0
				for _, a := range done {
					if a.Kind == slurm.ActRelease {
						released++
					}
				}
				fmt.Fprintf(cmd.OutOrStdout(), "gave %d jobs their users' limits back and released %d held jobs\n", len(done)-released, released)
			}
			return err
		},
	}
	site.registerCluster(cmd.Flags())
	return cmd
}

func runSlurm(ctx context.Context, g *globals, o slurmOptions) error {
	if o.models == "" {
		return errors.New("--models is required: a registry with a duration model (prescient train --target duration --trace slurm:...)")
	}
	if o.every < time.Second {
		return fmt.Errorf("--every %s: want at least 1s", o.every)
	}
	if err := o.cfg.Validate(); err != nil {
		return err
	}
	r, err := o.site.runner(g.logger)
	if err != nil {
		return err
	}
	access, tokens, err := slurmAccess(o.listen, o.tokens, g.logger)
	if err != nil {
		return err
	}
	if (len(o.cfg.HoldQOS) > 0) != (o.carbon != "") {
		return errors.New("--hold-qos and --carbon go together: the QOS to hold, and the grid's intensity to hold them for")
	}
	var carbon *carbonFile
	if o.carbon != "" {
		hold, err := carbonHold(o.carbonWait)
		if err != nil {
			return fmt.Errorf("--carbon-wait: %w", err)
		}
		o.cfg.Holder = hold
		carbon = &carbonFile{path: o.carbon}
		if _, err := carbon.Read(ctx); err != nil {
			return err
		}
	}
	est, err := newSlurmEstimator(o.models, g.logger)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	metrics, err := slurm.NewMetrics(reg)
	if err != nil {
		return err
	}
	if err := o.site.needCommands(ctx, r.Client, o.cfg); err != nil {
		return err
	}
	r.Estimator, r.Config, r.Warmup, r.Metrics = est, o.cfg, o.warmup, metrics
	if carbon != nil {
		r.Carbon = carbon.Read
	}
	log := r.Log
	if o.once {
		return errors.Join(r.Cycle(ctx), r.Close())
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if tokens != nil { // access reads the tokens in force at each request
		watchTokens(ctx, tokens, defaultTokensReload, nil, func(api.Tokens) {}, g.logger)
	}
	if o.listen != "" {
		ln, err := net.Listen("tcp", o.listen)
		if err != nil {
			return fmt.Errorf("--listen: %w", err)
		}
		srv := &http.Server{Handler: slurm.Handler(r, reg, access), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		log.Info("serving the advice", "addr", ln.Addr().String())
	}
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	for first := true; ; first = false {
		err := r.Cycle(ctx)
		switch {
		case errors.Is(err, slurm.ErrLocked), first && (errors.Is(err, slurm.ErrUnknownPartition) || errors.Is(err, slurm.ErrNoAgeFactor)):
			return err // a misspelt --partitions, or a Nice worth nothing, would otherwise leave autopilot idle
		case err != nil && ctx.Err() == nil:
			log.Error("cycle failed; the next one tries again", "err", err)
		}
		select {
		case <-ctx.Done():
			// Undo on the way out, with a fresh context: the signal's is done.
			restore, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := r.Stop(restore); err != nil {
				return fmt.Errorf("slurm: restoring on stop: %w", err)
			}
			log.Info("stopped; limits, Nice values, held jobs and nodes restored")
			return nil
		case <-tick.C:
		}
	}
}

// slurmAccess is who may read the advice served on listen: the tokens of
// the file at path (an admin reads everything, a viewer or submitter the
// jobs of its tenant's Slurm account), as the file says at each request
// (the caller watches it), or anyone on a loopback address.
func slurmAccess(listen, path string, log *slog.Logger) (slurm.Access, *watchfile.File[api.Tokens], error) {
	if path == "" {
		host, _, err := net.SplitHostPort(listen)
		if ip := net.ParseIP(host); listen != "" && (err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback())) {
			return nil, nil, fmt.Errorf("--listen %s: the advice names users' jobs; give --tokens FILE, or listen on a loopback address (behind a proxy of your own)", listen)
		}
		return nil, nil, nil
	}
	tokens, err := openTokens(path, log)
	if err != nil {
		return nil, nil, err
	}
	return func(token string) (slurm.Reader, bool) {
		p, ok := tokens.Current().Lookup(token)
		if !ok || p.Role == api.RoleAgent {
			return slurm.Reader{}, false
		}
		return slurm.Reader{Account: p.Tenant, Admin: p.Role == api.RoleAdmin}, true
	}, tokens, nil
}

// slurmEstimator is slurm.Estimator over the served duration models and
// the time-limit policy of evaluate --target limit.
type slurmEstimator struct {
	p            *predictor.Predictor
	trainedUntil time.Time // the served model's data: its errors there are no test

	why    string // what a recommended limit covers, in the policy's words
	limits *predictor.ServedLimits

	mu    sync.Mutex
	heard map[cluster.JobID]time.Time // jobs learned from, with their ends
}

func newSlurmEstimator(dir string, log *slog.Logger) (*slurmEstimator, error) {
	reg := training.Registry{Dir: dir}
	art, err := reg.LoadCurrent(models.TargetDuration)
	if err != nil {
		return nil, fmt.Errorf("--models: %w", err)
	}
	p, err := predictor.New(reg, log)
	if err != nil {
		return nil, err
	}
	policy := models.DefaultLimitPolicy()
	limits, err := predictor.NewServedLimits(policy)
	if err != nil {
		return nil, err
	}
	return &slurmEstimator{p: p, trainedUntil: art.DataUntil, limits: limits,
		why:   fmt.Sprintf("would have covered %.1f%% of comparable jobs' runs", 100*(1-policy.RunPast)),
		heard: map[cluster.JobID]time.Time{}}, nil
}

func (e *slurmEstimator) forecast(ctx context.Context, jobs []cluster.Job) ([]float64, string, error) {
	fc, err := e.p.Forecast(ctx, jobs)
	if err != nil {
		return nil, "", err
	}
	med := make([]float64, len(fc))
	src := ""
	for i, f := range fc {
		if f.DurationP50S == nil {
			return nil, "", predictor.ErrNoDurationModel
		}
		med[i], src = models.Log(*f.DurationP50S), "model "+f.ModelVersion
	}
	return med, src, nil
}

// Estimate implements slurm.Estimator.
func (e *slurmEstimator) Estimate(ctx context.Context, jobs []slurm.Job) (map[string]slurm.Estimate, error) {
	in := make([]cluster.Job, len(jobs))
	for i, j := range jobs {
		in[i] = cluster.NewJob(cluster.JobID(j.ID), j.Spec(), j.Submit)
	}
	med, src, err := e.forecast(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make(map[string]slurm.Estimate, len(jobs))
	for i, j := range jobs {
		run := time.Duration(models.Exp(med[i]) * float64(time.Second))
		out[j.ID] = slurm.Estimate{RunP50: run, Limit: e.limits.Recommend(&in[i], med[i]), Source: src, LimitWhy: e.why}
	}
	return out, nil
}

// Learn implements slurm.Estimator: each job not heard before, in the
// order they ended, tells the serving models' histories and the limit
// calibration. A job the advice served is calibrated at the median it was
// served (ServedLimits); one that pended and ended between two reads (or
// before the first) at a median forecast now, the nearest there is, unless
// the served model was trained on it.
func (e *slurmEstimator) Learn(ctx context.Context, acct []byte) error {
	res, err := datasets.ReadSlurm(bytes.NewReader(acct), "sacct --json", datasets.ReadOptions{Lenient: true})
	if err != nil {
		return err
	}
	var done []cluster.Job
	var latest time.Time
	e.mu.Lock()
	for _, j := range res.Jobs {
		if _, ok := e.heard[j.ID]; j.State.Terminal() && !ok {
			end := models.EndTime(&j)
			e.heard[j.ID] = end
			if end.After(latest) {
				latest = end
			}
			done = append(done, j)
		}
	}
	// Reads overlap by a cycle or so: past 100,000 jobs, forget what ended
	// a day before the latest, which no later read returns again.
	if len(e.heard) > 100_000 {
		for id, end := range e.heard {
			if end.Before(latest.Add(-24 * time.Hour)) {
				delete(e.heard, id)
			}
		}
	}
	e.mu.Unlock()
	slices.SortFunc(done, func(a, b cluster.Job) int { return models.EndTime(&a).Compare(models.EndTime(&b)) })
	var unserved []cluster.Job
	for _, j := range done {
		if !e.limits.Served(j.ID) && models.CompletedRun(&j) && j.SubmitTime.After(e.trainedUntil) {
			unserved = append(unserved, cluster.NewJob(j.ID, j.Spec, j.SubmitTime))
		}
	}
	var med []float64
	if len(unserved) > 0 {
		if med, _, err = e.forecast(ctx, unserved); err != nil {
			return err
		}
	}
	byID := make(map[cluster.JobID]int, len(unserved))
	for i, j := range unserved {
		byID[j.ID] = i
	}
	for _, j := range done {
		e.p.Observe(j)
		if i, ok := byID[j.ID]; ok {
			e.limits.ObserveAt(&j, med[i])
		} else {
			e.limits.Observe(&j)
		}
	}
	return nil
}

func newSlurmQueueCmd(g *globals) *cobra.Command {
	var server, token string
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "Show Slurm's pending jobs as squeue does, with Prescient's predicted starts and limits",
		Long: `Reads the advice of a running "prescient slurm --listen ADDR" and prints the pending
jobs in Slurm's priority order, in squeue's columns with Prescient's: the job's own
limit, the recommended one, the expected run time, the predicted start and end
(">TIME" when the start lies beyond the one-week horizon; "-" when none is predicted,
the reason says why).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, server+"/v1/slurm/advice", nil)
			if err != nil {
				return fmt.Errorf("--server: %w", err)
			}
			if token = cmp.Or(token, os.Getenv("PRESCIENT_TOKEN")); token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusUnauthorized:
				return fmt.Errorf("GET /v1/slurm/advice: %s: give a token of the advisor's --tokens file (--token, or env PRESCIENT_TOKEN)", resp.Status)
			case resp.StatusCode != http.StatusOK:
				return fmt.Errorf("GET /v1/slurm/advice: %s", resp.Status)
			}
			var doc struct {
				Advice []slurm.Advice `json:"advice"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
				return fmt.Errorf("GET /v1/slurm/advice: %w", err)
			}
			if g.output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(doc)
			}
			return slurmQueueTable(cmd.OutOrStdout(), doc.Advice)
		},
	}
	cmd.Flags().StringVar(&server, "server", "http://127.0.0.1:8081", "address of prescient slurm --listen")
	cmd.Flags().StringVar(&token, "token", "", "a token of its --tokens file (env PRESCIENT_TOKEN keeps it off the command line)")
	return cmd
}

// slurmQueueTable writes squeue's columns (JOBID PARTITION NAME USER ST)
// and Prescient's.
func slurmQueueTable(w io.Writer, adv []slurm.Advice) error {
	t := newTable(w)
	t.row("JOBID", "PARTITION", "NAME", "USER", "ST", "GPUS", "TIME_LIMIT", "ADVISED_LIMIT", "EXPECTED_RUN", "START", "END", "REASON")
	limit := func(d time.Duration) string {
		if d <= 0 {
			return "UNLIMITED"
		}
		return slurmClock(d)
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("2006-01-02T15:04:05")
	}
	for _, a := range adv {
		advised := "-"
		if a.Lowers() {
			advised = limit(a.Limit)
		}
		start := when(a.Start)
		if !a.StartAfter.IsZero() {
			start = ">" + when(a.StartAfter)
		}
		run := "-"
		if a.RunP50 > 0 {
			run = slurmClock(a.RunP50)
		}
		id := a.Job
		if a.ArrayTasks != "" {
			id += "_[" + a.ArrayTasks + "]" // as squeue writes a pending array
		}
		t.row(id, a.Partition, a.Name, a.User, "PD", a.GPUs, limit(a.UserLimit), advised, run, start, when(a.End), a.Reason)
	}
	return t.flush()
}

// slurmClock writes a duration as squeue does: [days-]hours:minutes:seconds.
func slurmClock(d time.Duration) string {
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h, m, s := d/time.Hour, (d%time.Hour)/time.Minute, (d%time.Minute)/time.Second
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:%02d", days, h, m, s)
	}
	return fmt.Sprintf("%d:%02d:%02d", h, m, s)
}
