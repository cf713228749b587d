package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/prescient-sched/prescient/api"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/service"
)

// clientFlags are where the user commands (jobs, queue, whatif) find the
// control plane: --server and --token, or PRESCIENT_SERVER and
// PRESCIENT_TOKEN, or the config file.
type clientFlags struct {
	server, token string
}

func (c *clientFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.server, "server", "http://127.0.0.1:8080", "the control plane's URL (env PRESCIENT_SERVER)")
	fs.StringVar(&c.token, "token", "", "an API token (env PRESCIENT_TOKEN keeps it off the command line)")
}

func (c *clientFlags) client() (*api.Client, error) {
	u, err := url.Parse(c.server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server %q: want http://HOST:PORT or https://HOST:PORT", c.server)
	}
	if c.token == "" {
		return nil, errors.New("--token: empty; the API wants a token (env PRESCIENT_TOKEN)")
	}
	return &api.Client{Server: c.server, Token: c.token}, nil
}

func newJobsCmd(g *globals) *cobra.Command {
	var cf clientFlags
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "Submit, list, show, cancel and follow jobs on a running control plane",
	}
	cf.register(cmd.PersistentFlags())
	cmd.AddCommand(newJobsSubmitCmd(g, &cf), newJobsListCmd(g, &cf), newJobsShowCmd(g, &cf),
		newJobsCancelCmd(g, &cf), newJobsLogsCmd(g, &cf), newJobsEventsCmd(g, &cf))
	return cmd
}

func newJobsSubmitCmd(g *globals, cf *clientFlags) *cobra.Command {
	var (
		req            api.SubmitRequest
		file, deadline string
		labels, env    []string
	)
	cmd := &cobra.Command{
		Use:   "submit [flags] -- COMMAND [ARG...]",
		Short: "Submit a job: its command after --, or a JSON request with --file",
		Example: `  prescient jobs submit --gpus 2 --tier batch --name bert -- python train.py --epochs 3
  prescient jobs submit --file job.json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				if countSet(cmd, jobFlags...) > 0 || len(args) > 0 {
					return errors.New("--file: the request is the file's; give no other job flags nor a command")
				}
				var err error
				if req, err = readSubmitFile(file); err != nil {
					return err
				}
			} else {
				req.Command = args
				var err error
				if req.Labels, err = keyValues("--label", labels); err != nil {
					return err
				}
				if req.Env, err = keyValues("--env", env); err != nil {
					return err
				}
				if req.Deadline, err = deadlineFlag(deadline, time.Now()); err != nil {
					return err
				}
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			st, err := c.Submit(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("submit: %w", err)
			}
			return g.print(cmd.OutOrStdout(), jobReport{st})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "a JSON file with the request (POST /v1/jobs's body; - for stdin)")
	f.StringVar(&req.ID, "id", "", "the job's ID (default: one the control plane makes)")
	f.StringVar(&req.Name, "name", "", "the job's name")
	f.StringVar(&req.Tenant, "tenant", "", "the tenant (default the token's; only an admin may name another)")
	f.StringVar(&req.Tier, "tier", "", "production, standard (the default), batch or opportunistic")
	f.IntVar(&req.GPUs, "gpus", 1, "GPUs")
	f.IntVar(&req.GPUMilli, "gpu-milli", 0, "each GPU's share in thousandths (0: whole GPUs)")
	f.StringSliceVar(&req.GPUModels, "gpu-model", nil, "GPU models the job may run on (default any)")
	f.IntVar(&req.GangSize, "gang-size", 0, "nodes the job spans, its GPUs split evenly")
	f.BoolVar(&req.Checkpointable, "checkpointable", false, "the job saves its state on request and resumes from it")
	f.StringVar(&deadline, "deadline", "", "when the job must have finished: RFC 3339 time, or a duration from now (4h)")
	f.StringArrayVar(&labels, "label", nil, "a label KEY=VALUE (repeatable)")
	f.StringArrayVar(&env, "env", nil, "an environment variable of the job KEY=VALUE (repeatable)")
	return cmd
}

// jobFlags are submit's flags that say what the job is.
var jobFlags = []string{"id", "name", "tenant", "tier", "gpus", "gpu-milli", "gpu-model", "gang-size", "checkpointable",
	"deadline", "label", "env"}

// countSet counts the named flags that were given.
func countSet(cmd *cobra.Command, names ...string) int {
	n := 0
	for _, name := range names {
		if fl := cmd.Flags().Lookup(name); fl != nil && fl.Changed {
			n++
		}
	}
	return n
}

func readSubmitFile(path string) (api.SubmitRequest, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return api.SubmitRequest{}, fmt.Errorf("--file: %w", err)
	}
	var req api.SubmitRequest
	if err := api.DecodeBody(b, &req); err != nil {
		return api.SubmitRequest{}, fmt.Errorf("--file %s: %w", path, err)
	}
	return req, nil
}

// keyValues reads KEY=VALUE flags.
func keyValues(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}

// deadlineFlag reads --deadline: an RFC 3339 time or a duration from now.
func deadlineFlag(s string, now time.Time) (string, error) {
	if s == "" {
		return "", nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return "", fmt.Errorf("--deadline %s: want a duration after now", s)
		}
		return now.Add(d).UTC().Format(time.RFC3339), nil
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return "", fmt.Errorf("--deadline %q: want an RFC 3339 time (2026-12-24T18:00:00Z) or a duration (4h)", s)
	}
	return s, nil
}

func newJobsListCmd(g *globals, cf *clientFlags) *cobra.Command {
	var (
		states, labels []string
		tenant         string
		limit          int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List jobs in the order submitted, as sacct does",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := url.Values{}
			if tenant != "" {
				q.Set("tenant", tenant)
			}
			if len(states) > 0 {
				q.Set("state", strings.Join(states, ","))
			}
			for _, l := range labels {
				q.Add("label", l)
			}
			jobs, err := listJobs(cmd, c, q, limit)
			if err != nil {
				return err
			}
			return g.print(cmd.OutOrStdout(), jobListReport{Jobs: jobs})
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&states, "state", nil, "only jobs in these states (queued, running, checkpointing, succeeded, failed, cancelled)")
	f.StringVar(&tenant, "tenant", "", "only this tenant's jobs (an admin's choice; others see their own)")
	f.StringArrayVar(&labels, "label", nil, "only jobs with this label KEY=VALUE (repeatable)")
	f.IntVar(&limit, "limit", 0, "at most this many jobs (0: all)")
	return cmd
}

// listJobs reads the listing page by page, up to limit jobs (0: all).
func listJobs(cmd *cobra.Command, c *api.Client, q url.Values, limit int) ([]service.JobStatus, error) {
	if limit < 0 {
		return nil, fmt.Errorf("--limit %d: want 0 (all) or more", limit)
	}
	if limit > 0 && limit <= 1000 {
		q.Set("limit", fmt.Sprint(limit))
		page, err := c.JobsPage(cmd.Context(), q)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		return page.Jobs, nil
	}
	jobs, err := c.Jobs(cmd.Context(), q)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	if limit > 0 && len(jobs) > limit {
		jobs = jobs[:limit]
	}
	return jobs, nil
}

func newJobsShowCmd(g *globals, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "show JOB",
		Short: "Show one job: its state, attempts, last error, placement and forecast",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			st, err := c.Job(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("job %s: %w", args[0], err)
			}
			return g.print(cmd.OutOrStdout(), jobReport{st})
		},
	}
}

func newJobsCancelCmd(g *globals, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB...",
		Short: "Cancel queued jobs, stop running ones",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			var out jobListReport
			var errs []error
			for _, id := range args {
				st, err := c.Cancel(cmd.Context(), id)
				if err != nil {
					errs = append(errs, fmt.Errorf("cancel %s: %w", id, err))
					continue
				}
				out.Jobs = append(out.Jobs, st)
			}
			if len(out.Jobs) > 0 {
				if err := g.print(cmd.OutOrStdout(), out); err != nil {
					return err
				}
			}
			return errors.Join(errs...)
		},
	}
}

func newJobsLogsCmd(g *globals, cf *clientFlags) *cobra.Command {
	var attempt, size int
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "The end of a job's log, read from the nodes it ran on",
		Long: "The end of a job's log (its newest attempt unless --attempt) on each node it ran on, read through\n" +
			"the node's agent; a node whose log cannot be read (gone, silent) says why.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempt < 0 {
				return fmt.Errorf("--attempt %d: want 1 or more (0: the newest)", attempt)
			}
			if size < 1 || size > service.MaxLogBytes {
				return fmt.Errorf("--bytes %d: want 1 to %d", size, service.MaxLogBytes)
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			l, err := c.JobLog(cmd.Context(), args[0], attempt, size)
			if err != nil {
				return fmt.Errorf("job %s: %w", args[0], err)
			}
			return g.print(cmd.OutOrStdout(), jobLogReport(l))
		},
	}
	cmd.Flags().IntVar(&attempt, "attempt", 0, "the attempt (0: the newest)")
	cmd.Flags().IntVar(&size, "bytes", service.DefaultLogBytes, "how much of the log's end to show")
	return cmd
}

// jobLogReport prints the log as it is; with several nodes, each under a
// header, as kubectl logs --prefix would tell them apart.
type jobLogReport service.JobLog

func (r jobLogReport) writeTable(w io.Writer) error {
	for _, n := range r.Nodes {
		if len(r.Nodes) > 1 {
			fmt.Fprintf(w, "==> %s (attempt %d) <==\n", n.Node, r.Attempt)
		}
		switch {
		case n.Unavailable != "":
			fmt.Fprintf(w, "(log unavailable: %s)\n", n.Unavailable)
		default:
			if n.Truncated {
				fmt.Fprintln(w, "(…)")
			}
			fmt.Fprint(w, n.Text)
			if n.Text != "" && !strings.HasSuffix(n.Text, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
	return nil
}

func newJobsEventsCmd(g *globals, cf *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "events JOB",
		Short: "A job's history: every state change with its reason, oldest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			evs, err := c.JobEvents(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("job %s: %w", args[0], err)
			}
			return g.print(cmd.OutOrStdout(), jobEventsReport(evs))
		},
	}
}

func newQueueCmd(g *globals) *cobra.Command {
	var (
		cf     clientFlags
		tenant string
	)
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "The jobs running and waiting, with their predicted start and end, as squeue --start shows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := cf.client()
			if err != nil {
				return err
			}
			q := url.Values{"state": {"queued,running,checkpointing"}}
			if tenant != "" {
				q.Set("tenant", tenant)
			}
			jobs, err := c.Jobs(cmd.Context(), q)
			if err != nil {
				return fmt.Errorf("queue: %w", err)
			}
			sortQueue(jobs)
			return g.print(cmd.OutOrStdout(), queueReport{Jobs: jobs})
		},
	}
	cf.register(cmd.Flags())
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's jobs (an admin's choice; others see their own)")
	return cmd
}

// sortQueue orders the running jobs first, by start, then the waiting
// ones by predicted start (those without one last), then by submission.
func sortQueue(jobs []service.JobStatus) {
	start := func(j service.JobStatus) (int, time.Time) {
		switch {
		case j.State != cluster.StateQueued && j.StartTime != nil:
			return 0, *j.StartTime
		case j.PredictedStart != nil:
			return 1, *j.PredictedStart
		}
		return 2, j.SubmitTime
	}
	slices.SortStableFunc(jobs, func(a, b service.JobStatus) int {
		ra, ta := start(a)
		rb, tb := start(b)
		if ra != rb {
			return ra - rb
		}
		if c := ta.Compare(tb); c != 0 {
			return c
		}
		return a.SubmitTime.Compare(b.SubmitTime)
	})
}

func newWhatIfCmd(g *globals) *cobra.Command {
	var (
		cf                      clientFlags
		file, policy            string
		addJobs                 []string
		removeJobs, removeNodes []string
		horizon                 time.Duration
	)
	cmd := &cobra.Command{
		Use:   "whatif",
		Short: "Ask the control plane what would change: jobs added or removed, nodes removed, another policy",
		Example: `  prescient whatif --add-job '{"gpus":8,"tier":"production"}'
  prescient whatif --remove-node gpu-07 --policy tiresias
  prescient whatif --file question.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var req api.WhatIfRequest
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("--file: %w", err)
				}
				if err := api.DecodeBody(b, &req); err != nil {
					return fmt.Errorf("--file %s: %w", file, err)
				}
			}
			for i, s := range addJobs {
				var j api.SubmitRequest
				if err := api.DecodeBody([]byte(s), &j); err != nil {
					return fmt.Errorf("--add-job %d (%s): %w", i+1, s, err)
				}
				req.AddJobs = append(req.AddJobs, j)
			}
			req.RemoveJobs = append(req.RemoveJobs, removeJobs...)
			req.RemoveNodes = append(req.RemoveNodes, removeNodes...)
			if policy != "" {
				req.Policy = policy
			}
			if horizon < 0 {
				return fmt.Errorf("--horizon %s: must not be negative", horizon)
			}
			if horizon > 0 {
				req.HorizonS = horizon.Seconds()
			}
			c, err := cf.client()
			if err != nil {
				return err
			}
			res, err := c.WhatIf(cmd.Context(), req)
			if err != nil {
				return fmt.Errorf("what-if: %w", err)
			}
			return g.print(cmd.OutOrStdout(), whatIfReport(res))
		},
	}
	cf.register(cmd.Flags())
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "a JSON file with the question (POST /v1/whatif's body); the flags add to it")
	f.StringArrayVar(&addJobs, "add-job", nil, `a hypothetical job as JSON, e.g. '{"gpus":4,"tier":"batch"}' (repeatable)`)
	f.StringSliceVar(&removeJobs, "remove-job", nil, "jobs to leave out (repeatable)")
	f.StringSliceVar(&removeNodes, "remove-node", nil, "nodes to leave out (repeatable)")
	f.StringVar(&policy, "policy", "", "plan the scenario with this policy instead of the serving one")
	f.DurationVar(&horizon, "horizon", 0, "how far ahead to plan (0: the control plane's default)")
	return cmd
}

// The reports. Times print in the local zone, to the second, as sacct and
// squeue do; durations to the second.

const cliTime = "2006-01-02T15:04:05"

func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format(cliTime)
}

func seconds(s float64) string {
	if s <= 0 {
		return "-"
	}
	return time.Duration(s * float64(time.Second)).Round(time.Second).String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// jobReport is one job, as key and value rows.
type jobReport struct{ service.JobStatus }

func (r jobReport) writeTable(w io.Writer) error {
	j := r.JobStatus
	t := newTable(w)
	t.row("job", j.ID)
	t.row("name", orDash(j.Name))
	t.row("tenant", j.Tenant)
	t.row("tier", j.Tier)
	gpus := fmt.Sprint(j.GPUs)
	if j.GPUMilli > 0 && j.GPUMilli < cluster.MilliGPU {
		gpus = fmt.Sprintf("%d (%d milli-GPUs each)", j.GPUs, j.GPUMilli)
	}
	t.row("gpus", gpus)
	t.row("state", j.State)
	t.row("attempts", j.Attempts)
	t.row("submitted", when(&j.SubmitTime))
	t.row("started", when(j.StartTime))
	t.row("ended", when(j.EndTime))
	if j.ExitCode != nil {
		t.row("exit code", *j.ExitCode)
	}
	if len(j.Placement) > 0 {
		t.row("placement", strings.Join(j.Placement, " "))
	}
	if j.Forecast != nil {
		t.row("forecast", fmt.Sprintf("P50 %s, P90 %s (%s)", seconds(j.Forecast.DurationP50S), seconds(j.Forecast.DurationP90S), j.Forecast.Source))
	}
	switch {
	case j.PredictedStart != nil || j.PredictedEnd != nil:
		t.row("predicted", fmt.Sprintf("start %s, end %s", when(j.PredictedStart), when(j.PredictedEnd)))
	case j.PredictedStartAfter != nil:
		t.row("predicted", fmt.Sprintf("start after %s (beyond the queue forecast)", when(j.PredictedStartAfter)))
	}
	if j.Deadline != nil {
		feasible := "-"
		if j.DeadlineFeasible != nil {
			feasible = map[bool]string{true: "feasible", false: "at risk"}[*j.DeadlineFeasible]
		}
		t.row("deadline", when(j.Deadline)+" ("+feasible+")")
	}
	if j.Reason != "" {
		t.row("reason", j.Reason)
	}
	if j.LastError != "" {
		t.row("last error", j.LastError)
	}
	if len(j.History) > 0 {
		t.row("run time", seconds(j.RunS))
		t.row("gpu-hours", fmt.Sprintf("%.2f", j.GPUHours))
		t.row("energy", kWh(j.EnergyKWh))
	}
	if err := t.flush(); err != nil || len(j.History) == 0 {
		return err
	}
	// Its attempts, as sacct lists a job's steps.
	fmt.Fprintln(w)
	t = newTable(w)
	t.row("ATTEMPT", "GPUS", "START", "END", "ELAPSED", "GPU-H", "ENERGY", "ENDED BY")
	for _, a := range j.History {
		gpus := make([]string, len(a.Allocations))
		for i, g := range a.Allocations {
			gpus[i] = fmt.Sprintf("%s/gpu%d", g.Node, g.GPU)
			if g.Milli < cluster.MilliGPU {
				gpus[i] += fmt.Sprintf(":%dm", g.Milli)
			}
		}
		t.row(a.Attempt, orDash(strings.Join(gpus, ",")), when(&a.StartTime), when(a.EndTime), seconds(a.RunS),
			fmt.Sprintf("%.2f", a.GPUHours), kWh(a.EnergyKWh), orDash(a.EndedBy))
	}
	return t.flush()
}

// kWh is an energy for a table, "-" when unknown.
func kWh(e *float64) string {
	if e == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f kWh", *e)
}

// jobListReport is jobs as sacct lists them.
type jobListReport struct {
	Jobs []service.JobStatus `json:"jobs"`
}

func (r jobListReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("JOBID", "NAME", "TENANT", "TIER", "GPUS", "STATE", "ATTEMPTS", "SUBMIT", "START", "END", "EXIT")
	for _, j := range r.Jobs {
		exit := "-"
		if j.ExitCode != nil {
			exit = fmt.Sprint(*j.ExitCode)
		}
		t.row(j.ID, orDash(j.Name), j.Tenant, j.Tier, j.GPUs, j.State, j.Attempts, when(&j.SubmitTime), when(j.StartTime), when(j.EndTime), exit)
	}
	return t.flush()
}

// queueReport is the queue as squeue --start shows it: the start (or
// its prediction) and predicted end, and where a job runs or why it
// waits.
type queueReport struct {
	Jobs []service.JobStatus `json:"jobs"`
}

func (r queueReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("JOBID", "NAME", "TENANT", "TIER", "GPUS", "STATE", "START_TIME", "END_TIME", "NODES(REASON)")
	for _, j := range r.Jobs {
		start, end := when(j.PredictedStart), when(j.PredictedEnd)
		if j.PredictedStartAfter != nil {
			start = "after " + when(j.PredictedStartAfter)
		}
		where := "(" + orDash(j.Reason) + ")"
		if j.State != cluster.StateQueued {
			start, where = when(cmp.Or(j.StartTime, j.PredictedStart)), nodesOf(j.Placement)
		}
		t.row(j.ID, orDash(j.Name), j.Tenant, j.Tier, j.GPUs, j.State, start, end, where)
	}
	return t.flush()
}

// nodesOf lists the nodes of GPUs named "node/gpuN", in order.
func nodesOf(gpus []string) string {
	var nodes []string
	for _, g := range gpus {
		n, _, _ := strings.Cut(g, "/")
		if !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return orDash(strings.Join(nodes, ","))
}

// jobEventsReport is a job's history.
type jobEventsReport api.JobEventList

func (r jobEventsReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("TIME", "EVENT", "STATES", "MESSAGE")
	for _, e := range r.Events {
		states := string(e.To)
		if e.From != "" {
			states = string(e.From) + " -> " + states
		}
		t.row(e.Time.Local().Format(cliTime), e.Type, states, orDash(e.Message))
	}
	return t.flush()
}

// startOrAfter is a predicted start, or "after" the horizon when the job
// starts beyond it.
func startOrAfter(start *time.Time, beyond bool, horizon *time.Time) string {
	if beyond && horizon != nil {
		return "after " + when(horizon)
	}
	return when(start)
}

// whatIfReport is a what-if answer: both plans' figures, then each job
// whose plan changed.
type whatIfReport service.WhatIfResult

func (r whatIfReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("", "NOW", "SCENARIO")
	t.row("policy", "-", r.Policy)
	t.row("mean wait", seconds(r.Baseline.MeanWaitS), seconds(r.Scenario.MeanWaitS))
	t.row("makespan", seconds(r.Baseline.MakespanS), seconds(r.Scenario.MakespanS))
	t.row("deadlines met", fmt.Sprintf("%d of %d", r.Baseline.DeadlinesMet, r.Baseline.DeadlinesTotal),
		fmt.Sprintf("%d of %d", r.Scenario.DeadlinesMet, r.Scenario.DeadlinesTotal))
	if r.Horizon != nil {
		t.row("horizon", fmt.Sprintf("%s (%s)", when(r.Horizon), r.HorizonReason), "")
		t.row("start after it", r.Baseline.BeyondHorizon, r.Scenario.BeyondHorizon)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t = newTable(w)
	t.row("JOBID", "START", "END", "NOW_START", "NOW_END", "END_DELTA")
	for _, j := range r.Jobs {
		id := string(j.Job)
		if j.Hypothetical {
			id += " (new)"
		}
		delta := "-"
		if j.DeltaEndS != nil {
			delta = fmt.Sprintf("%+ds", int64(*j.DeltaEndS))
		}
		t.row(id, startOrAfter(j.Start, j.BeyondHorizon, r.Horizon), when(j.End),
			startOrAfter(j.BaselineStart, j.BaselineBeyondHorizon, r.Horizon), when(j.BaselineEnd), delta)
	}
	return t.flush()
}
