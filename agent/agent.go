package agent

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/collector"
	"github.com/prescient-sched/prescient/collector/nvml"
)

// Config configures an Agent.
type Config struct {
	// Server is the control plane's base URL (http://host:port).
	Server string
	// Token is the agent token sent as "Authorization: Bearer <token>".
	Token string
	// Node is the host the agent registers.
	Node protocol.NodeInfo
	// WorkDir holds the state file and, under jobs/, each job's working
	// directories, logs and checkpoints.
	WorkDir string

	Client *http.Client // default: a client without a global timeout
	Logger *slog.Logger
	// PollWait is how long one poll waits for commands (the hub may bound
	// it lower); default 30s.
	PollWait time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential backoff of
	// retries; default 250ms and 10s.
	BackoffMin, BackoffMax time.Duration
	// AckPoll is how often the acknowledgement files are looked at;
	// default 200ms.
	AckPoll time.Duration
	// MaxEvents bounds the events kept while the control plane is away;
	// default 10000 (the oldest are dropped, counted and logged).
	MaxEvents int
	// Env is the environment jobs start from; nil means the agent's own
	// without its PRESCIENT_* settings (which hold its token).
	Env []string
	// ProcRoot is the proc file system; default /proc.
	ProcRoot string
	// Supervisor is the program every job is started through, with
	// SuperviseArg as its first argument (see Supervise); default
	// /proc/self/exe, the agent's own executable.
	Supervisor string
	// Load, when set (a simulated host), is told which GPUs each running
	// job holds, so that the simulated GPUs show its load and process:
	// SimulatedUtil busy and SimulatedMemFraction of the memory.
	Load nvml.LoadModel
	// Power, when set, caps the GPUs of a job that asks for it
	// (StartSpec.PowerLimitFraction) and lifts the cap when it ends: the
	// NVML host (real or simulated) the collector reads. Nil ignores caps.
	Power nvml.PowerLimiter
}

// The load a running job puts on a simulated GPU (Config.Load).
const (
	SimulatedUtil        = 0.9
	SimulatedMemFraction = 0.6
)

func (c *Config) defaults() error {
	if c.Server == "" {
		return errors.New("server: empty; want the control plane's URL")
	}
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("server: %q is not an http(s) URL", c.Server)
	}
	c.Server = strings.TrimRight(c.Server, "/")
	if err := c.Node.Validate(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if c.WorkDir == "" {
		return errors.New("work dir: empty")
	}
	// Jobs run in their own directories: every path they are given must
	// not depend on the agent's working directory.
	abs, err := filepath.Abs(c.WorkDir)
	if err != nil {
		return fmt.Errorf("work dir: %w", err)
	}
	c.WorkDir = abs
	if c.Client == nil {
		c.Client = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.PollWait <= 0 {
		c.PollWait = 30 * time.Second
	}
	if c.BackoffMin <= 0 {
		c.BackoffMin = 250 * time.Millisecond
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(10*time.Second, c.BackoffMin)
	}
	if c.AckPoll <= 0 {
		c.AckPoll = 200 * time.Millisecond
	}
	if c.MaxEvents <= 0 {
		c.MaxEvents = protocol.MaxEventsPerRequest
	}
	c.MaxEvents = min(c.MaxEvents, protocol.MaxEventsPerRequest)
	if c.Env == nil {
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, envPrefix) {
				c.Env = append(c.Env, kv)
			}
		}
	}
	if c.ProcRoot == "" {
		c.ProcRoot = "/proc"
	}
	if c.Supervisor == "" {
		c.Supervisor = "/proc/self/exe"
	}
	return nil
}

// Agent is the node agent. Its methods are safe for concurrent use.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	instance string
	out      *outbox
	// sendMu serializes the posts that carry events (registrations and
	// event posts), so that events arrive in order.
	sendMu sync.Mutex

	mu       sync.Mutex
	attempts map[attemptKey]*attempt
	// byPID maps a running attempt's leader PID to it, for JobOfPID.
	byPID     map[int]*attempt
	connected bool
}

var _ collector.JobRegistry = (*Agent)(nil)

type attemptKey struct {
	job     string
	attempt int
}

// New makes an agent: it reads the state file in the work directory and
// takes over the attempts that still run (reporting those that ended while
// no agent watched).
func New(cfg Config) (*Agent, error) {
	if err := cfg.defaults(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "jobs"), 0o755); err != nil {
		return nil, fmt.Errorf("agent: work dir: %w", err)
	}
	a := &Agent{
		cfg: cfg, log: cfg.Logger.With("component", "agent", "node", cfg.Node.Name),
		instance: newID(), out: newOutbox(cfg.MaxEvents),
		attempts: map[attemptKey]*attempt{}, byPID: map[int]*attempt{},
	}
	recs, err := loadState(a.statePath())
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	// Every record first, the power limits settled, and only then the
	// running ones watched: a watcher that sees its job end changes the
	// records and the limits.
	var running []*attempt
	for _, r := range recs {
		if p := a.adopt(r); p != nil {
			running = append(running, p)
		}
	}
	a.settlePowerLimits()
	for _, p := range running {
		a.watch(p)
	}
	return a, nil
}

// Run connects to the control plane and serves its commands until ctx
// ends. The jobs keep running when Run returns (a new agent on the same work
// directory takes them over); their events wait in memory.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { a.sendLoop(ctx) })
	a.connectLoop(ctx)
	wg.Wait()
	return nil
}

// connectLoop registers, then polls and carries out commands; any failure
// sends it back to registering, with backoff, so every reconnection
// re-registers the running list.
func (a *Agent) connectLoop(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	b := a.backoff()
	var hub string
	var after int64
	for ctx.Err() == nil {
		resp, err := a.register(ctx)
		if err != nil {
			a.setConnected(false, err)
			b.sleep(ctx)
			continue
		}
		b.reset()
		if resp.Hub != hub {
			hub, after = resp.Hub, 0 // a new hub numbers its commands afresh
		}
		a.setConnected(true, nil)
		wait := min(a.cfg.PollWait, time.Duration(resp.PollWaitS*float64(time.Second)))
		if wait <= 0 {
			wait = a.cfg.PollWait
		}
		for ctx.Err() == nil {
			cmds, err := a.poll(ctx, resp.Session, after, wait)
			if errors.Is(err, errSessionExpired) {
				a.log.Info("session expired: registering again")
				break
			}
			if err != nil {
				if ctx.Err() == nil {
					a.setConnected(false, err)
					b.sleep(ctx)
				}
				break
			}
			for _, c := range cmds {
				if c.Type == protocol.CommandLog {
					wg.Go(func() { a.sendLog(ctx, c) }) // reading a log holds up no stop
				} else {
					a.handle(c)
				}
				after = c.Seq
			}
		}
	}
}

func (a *Agent) setConnected(ok bool, err error) {
	a.mu.Lock()
	was := a.connected
	a.connected = ok
	a.mu.Unlock()
	switch {
	case ok && !was:
		a.log.Info("registered with the control plane", "server", a.cfg.Server, "running", len(a.Running()))
	case !ok && was:
		a.log.Warn("control plane unreachable: jobs keep running, events are kept", "server", a.cfg.Server, "error", err)
	case !ok:
		a.log.Debug("control plane unreachable", "server", a.cfg.Server, "error", err)
	}
}

// register sends the node, the running list and the undelivered events.
func (a *Agent) register(ctx context.Context) (protocol.RegisterResponse, error) {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	// One snapshot of the queued events and the running list: an attempt
	// that ended is either still listed or its exit is queued (ended
	// queues it under a.mu).
	a.mu.Lock()
	events := a.out.pending(protocol.MaxEventsPerRequest)
	running := a.runningLocked()
	a.mu.Unlock()
	req := protocol.RegisterRequest{Node: a.cfg.Node, Instance: a.instance, Running: running, Events: events}
	var resp protocol.RegisterResponse
	if err := a.do(ctx, http.MethodPost, protocol.PathRegister, req, &resp, 30*time.Second); err != nil {
		return protocol.RegisterResponse{}, err
	}
	if len(events) > 0 {
		a.out.delivered(events[len(events)-1].Seq)
		a.reported(events)
	}
	if resp.Session == "" {
		return protocol.RegisterResponse{}, errors.New("register: the answer has no session")
	}
	return resp, nil
}

var errSessionExpired = errors.New("session expired")

// poll waits for commands.
func (a *Agent) poll(ctx context.Context, session string, after int64, wait time.Duration) ([]protocol.Command, error) {
	q := url.Values{"session": {session}, "after": {strconv.FormatInt(after, 10)},
		"wait_s": {strconv.FormatFloat(wait.Seconds(), 'f', -1, 64)}, "can": {protocol.CanLog}}
	path := fmt.Sprintf(protocol.PathCommands, url.PathEscape(a.cfg.Node.Name)) + "?" + q.Encode()
	var resp protocol.CommandsResponse
	err := a.do(ctx, http.MethodGet, path, nil, &resp, wait+15*time.Second)
	var se *statusError
	if errors.As(err, &se) && se.status == http.StatusConflict {
		return nil, errSessionExpired
	}
	if err != nil {
		return nil, err
	}
	if err := resp.Validate(); err != nil {
		return nil, fmt.Errorf("commands: %w", err)
	}
	return resp.Commands, nil
}

// sendLoop posts queued events, in order, with backoff while the control
// plane is away.
func (a *Agent) sendLoop(ctx context.Context) {
	b := a.backoff()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.out.notify:
		}
		for a.out.len() > 0 && ctx.Err() == nil {
			if err := a.sendEvents(ctx); err != nil {
				a.log.Debug("posting events failed; retrying", "error", err, "waiting", a.out.len())
				b.sleep(ctx)
				continue
			}
			b.reset()
		}
	}
}

func (a *Agent) sendEvents(ctx context.Context) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	events := a.out.pending(500)
	if len(events) == 0 {
		return nil
	}
	path := fmt.Sprintf(protocol.PathEvents, url.PathEscape(a.cfg.Node.Name))
	var resp protocol.EventsResponse
	if err := a.do(ctx, http.MethodPost, path, protocol.EventsRequest{Instance: a.instance, Events: events}, &resp, 30*time.Second); err != nil {
		return err
	}
	a.out.delivered(events[len(events)-1].Seq)
	a.reported(events)
	return nil
}

// emit queues an event for the control plane.
func (a *Agent) emit(e protocol.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	if a.out.add(e) {
		a.log.Warn("event queue full: dropped the oldest event", "max_events", a.cfg.MaxEvents)
	}
}

// statusError is an answer with a status other than 2xx.
type statusError struct {
	status  int
	code    string
	message string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("control plane answered %d %s: %s", e.status, e.code, e.message)
}

// do sends one request with the agent token and decodes the answer.
func (a *Agent) do(ctx context.Context, method, path string, body, out any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.cfg.Server+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+a.cfg.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, protocol.MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if len(b) > protocol.MaxBodyBytes {
		return fmt.Errorf("%s %s: answer over %d bytes", method, path, protocol.MaxBodyBytes)
	}
	if resp.StatusCode/100 != 2 {
		se := &statusError{status: resp.StatusCode, message: protocol.Truncate(strings.TrimSpace(string(b)), 200)}
		var eb protocol.ErrorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error.Code != "" {
			se.code, se.message = eb.Error.Code, eb.Error.Message
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			a.log.Error("the control plane refuses the agent token", "status", resp.StatusCode, "message", se.message)
		}
		return se
	}
	if err := protocol.DecodeStrict(bytes.NewReader(b), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// backoff is a jittered exponential backoff.
type backoff struct {
	min, max, cur time.Duration
}

func (a *Agent) backoff() *backoff {
	return &backoff{min: a.cfg.BackoffMin, max: a.cfg.BackoffMax, cur: a.cfg.BackoffMin}
}

// sleep waits cur with ±50% jitter (or until ctx ends) and doubles cur.
func (b *backoff) sleep(ctx context.Context) {
	d := b.cur/2 + rand.N(b.cur)
	b.cur = min(2*b.cur, b.max)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (b *backoff) reset() { b.cur = b.min }

func newID() string {
	var b [8]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
