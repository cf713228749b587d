package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/internal/strictjson"
)

// The agent routes, relative to the control plane's base URL.
const (
	PathRegister = "/v1/agents/register"    // POST RegisterRequest → RegisterResponse
	PathCommands = "/v1/agents/%s/commands" // GET ?session=&after=&wait_s= → CommandsResponse
	PathEvents   = "/v1/agents/%s/events"   // POST EventsRequest → EventsResponse
	PathLogs     = "/v1/agents/%s/logs"     // POST LogReply → LogReplyResponse
	// CanLog is the value of a poll's "can" query parameter from an agent
	// that answers log commands; the hub sends them to no other (an older
	// agent would refuse the whole list).
	CanLog = "log"
	// MaxLogBytes is the longest log tail a log command may ask for.
	MaxLogBytes         = 1 << 20
	MaxBodyBytes        = 8 << 20 // largest request or response body either side reads
	maxNameBytes        = 253     // a node name, as a DNS name
	maxIDBytes          = 256     // a job ID, as the collector tags it
	maxArgs             = 4096    // argv entries of a start command
	maxGPUs             = 1024    // GPUs of one node
	MaxEventsPerRequest = 10000   // events in one request
)

// RegisterRequest is what an agent says when it (re)connects: its host, the
// attempts it runs, and the events it has not delivered yet (applied before
// the running list, so that an exit the control plane missed arrives before
// the node's list that no longer has the job).
type RegisterRequest struct {
	Node NodeInfo `json:"node"`
	// Instance identifies this run of the agent process; events are
	// numbered per instance.
	Instance string           `json:"instance"`
	Running  []RunningAttempt `json:"running"`
	Events   []Event          `json:"events,omitempty"`
}

// NodeInfo is the host as the agent reports it.
type NodeInfo struct {
	Name        string            `json:"name"`
	GPUs        []GPUInfo         `json:"gpus"`
	CPUMilli    int64             `json:"cpu_milli,omitempty"`
	MemoryBytes int64             `json:"memory_bytes,omitempty"`
	Rack        string            `json:"rack,omitempty"`
	Leaf        string            `json:"leaf,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// GPUInfo is one GPU of the host.
type GPUInfo struct {
	Index        int    `json:"index"`
	UUID         string `json:"uuid,omitempty"`
	Model        string `json:"model"`
	MemoryBytes  int64  `json:"memory_bytes"`
	NVLinkDomain string `json:"nvlink_domain,omitempty"`
	MIGEnabled   bool   `json:"mig_enabled,omitempty"`
}

// RunningAttempt is one attempt a node runs (one rank of it).
type RunningAttempt struct {
	Job       string `json:"job"`
	Attempt   int    `json:"attempt"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
}

// RegisterResponse tells the agent how to poll.
type RegisterResponse struct {
	// Session is passed with every poll; a poll with a stale session is
	// answered 409 and the agent registers again.
	Session string `json:"session"`
	// Hub identifies the hub's process: when it changes (the control plane
	// restarted), command numbering starts again.
	Hub string `json:"hub"`
	// PollWaitS bounds how long a poll waits for commands.
	PollWaitS float64 `json:"poll_wait_s"`
}

// CommandType names a command.
type CommandType string

// The commands.
const (
	CommandStart      CommandType = "start"
	CommandCheckpoint CommandType = "checkpoint"
	CommandStop       CommandType = "stop"
	// CommandLog asks for the tail of the attempt's log on the node,
	// answered by a LogReply posted to PathLogs.
	CommandLog CommandType = "log"
)

// Command is one thing the hub asks of an agent. Seq numbers a node's
// commands from 1 upwards within one hub process.
type Command struct {
	Seq     int64       `json:"seq"`
	Type    CommandType `json:"type"`
	Job     string      `json:"job"`
	Attempt int         `json:"attempt"`
	// Start only.
	Start *StartSpec `json:"start,omitempty"`
	// Stop only: how long SIGTERM has before SIGKILL.
	GraceS float64 `json:"grace_s,omitempty"`
	// Log only.
	Log *LogSpec `json:"log,omitempty"`
}

// LogSpec is what a log command asks for.
type LogSpec struct {
	// ID names the request; the reply carries it.
	ID string `json:"id"`
	// MaxBytes is how much of the log's end to send, 1 to MaxLogBytes.
	MaxBytes int `json:"max_bytes"`
}

// FromWholeLine makes a log tail cut at an arbitrary byte start at a
// line, as a truncated LogReply's Text does: what follows its first line
// break, or the tail as it is when its only break ends it or it has none.
func FromWholeLine(tail string) string {
	if i := strings.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
		return tail[i+1:]
	}
	return tail
}

// LogReply answers a log command: the tail of the attempt's log on the
// node, or why there is none.
type LogReply struct {
	ID   string `json:"id"`
	Text string `json:"text"`
	// Truncated is set when the log is longer than Text; Text then starts
	// at a line.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why there is no log (Text is empty).
	Error string `json:"error,omitempty"`
}

// LogReplyResponse says whether a request waited for the reply.
type LogReplyResponse struct {
	Accepted bool `json:"accepted"`
}

// StartSpec is how to start one rank of an attempt.
type StartSpec struct {
	GPUs    []int             `json:"gpus"`
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// CheckpointSignal names the checkpoint signal; "" is SIGUSR1.
	CheckpointSignal string `json:"checkpoint_signal,omitempty"`
	// CheckpointEveryS asks for a checkpoint this often; 0 only on request.
	CheckpointEveryS float64 `json:"checkpoint_every_s,omitempty"`
	Rank             int     `json:"rank"`
	WorldSize        int     `json:"world_size"`
	// ResumeStep and ResumePath name the checkpoint to resume from, when
	// the control plane knows one (the workload finds its newest itself).
	ResumeStep int64  `json:"resume_step,omitempty"`
	ResumePath string `json:"resume_path,omitempty"`
	// Labels are the job's labels (experiment, run, pipeline ids), which
	// the collector writes with the job's GPU processes.
	Labels map[string]string `json:"labels,omitempty"`
	// PowerLimitFraction caps the job's GPUs at this fraction of their
	// default power limit while it runs (the plan's power cap); 0 leaves
	// them uncapped.
	PowerLimitFraction float64 `json:"power_limit_fraction,omitempty"`
}

// CommandsResponse answers a poll.
type CommandsResponse struct {
	Commands []Command `json:"commands"`
}

// EventType names an event; the values are executor.JobEventType's.
type EventType string

// The events an agent posts.
const (
	EventStarted      EventType = "started"
	EventCheckpointed EventType = "checkpointed"
	EventExited       EventType = "exited"
	EventLost         EventType = "lost"
)

// Event is one thing that happened to a job on the node.
type Event struct {
	// Seq numbers the events of one agent instance from 1; the hub drops
	// those it has seen (a retried post).
	Seq       int64     `json:"seq"`
	Type      EventType `json:"type"`
	Time      time.Time `json:"time"`
	Job       string    `json:"job"`
	Attempt   int       `json:"attempt"`
	Rank      int       `json:"rank"`
	WorldSize int       `json:"world_size"`
	ExitCode  int       `json:"exit_code"`
	Stopped   bool      `json:"stopped,omitempty"`
	// Checkpoint is set for checkpointed events.
	Checkpoint *CheckpointInfo `json:"checkpoint,omitempty"`
	Message    string          `json:"message,omitempty"`
}

// CheckpointInfo is a checkpoint that landed.
type CheckpointInfo struct {
	Time time.Time `json:"time"`
	Step int64     `json:"step"`
	Path string    `json:"path"`
}

// EventsRequest posts events.
type EventsRequest struct {
	Instance string  `json:"instance"`
	Events   []Event `json:"events"`
}

// EventsResponse says how many events were new.
type EventsResponse struct {
	Accepted int `json:"accepted"`
}

// ErrorBody is the API's error shape (DESIGN.md section 5).
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// WriteJSON answers v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// WriteError answers the API's error shape (ErrorBody) with status.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	var b ErrorBody
	b.Error.Code, b.Error.Message = code, msg
	WriteJSON(w, status, b)
}

// DecodeStrict decodes one JSON object into v, rejecting unknown fields,
// trailing data and what strictjson.Check refuses (a key of the wrong
// case, a key twice, text that is not Unicode), and names the offset of a
// syntax error.
func DecodeStrict(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
		case errors.As(err, &te):
			return fmt.Errorf("field %s: want %s, got JSON %s (byte %d)", te.Field, te.Type, te.Value, te.Offset)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("invalid JSON: the body ends in the middle of a value")
		case errors.Is(err, io.EOF):
			return errors.New("empty body: want a JSON object")
		}
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON object")
	}
	return strictjson.Check(data, reflect.TypeOf(v))
}

// DecodeRegister reads and checks a RegisterRequest.
func DecodeRegister(b []byte) (RegisterRequest, error) {
	var r RegisterRequest
	if err := DecodeStrict(bytes.NewReader(b), &r); err != nil {
		return RegisterRequest{}, err
	}
	return r, r.Validate()
}

// DecodeLogReply reads and checks a LogReply.
func DecodeLogReply(b []byte) (LogReply, error) {
	var r LogReply
	if err := DecodeStrict(bytes.NewReader(b), &r); err != nil {
		return LogReply{}, err
	}
	return r, CheckID("id", r.ID)
}

// DecodeEvents reads and checks an EventsRequest.
func DecodeEvents(b []byte) (EventsRequest, error) {
	var r EventsRequest
	if err := DecodeStrict(bytes.NewReader(b), &r); err != nil {
		return EventsRequest{}, err
	}
	return r, r.Validate()
}

// DecodeCommands reads and checks a CommandsResponse.
func DecodeCommands(b []byte) (CommandsResponse, error) {
	var r CommandsResponse
	if err := DecodeStrict(bytes.NewReader(b), &r); err != nil {
		return CommandsResponse{}, err
	}
	return r, r.Validate()
}

// Validate names the first field that is wrong.
func (r RegisterRequest) Validate() error {
	if err := r.Node.Validate(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if err := CheckID("instance", r.Instance); err != nil {
		return err
	}
	for i, a := range r.Running {
		if err := a.validate(); err != nil {
			return fmt.Errorf("running[%d]: %w", i, err)
		}
	}
	return validateEvents(r.Events)
}

// Validate names the first field that is wrong.
func (n NodeInfo) Validate() error {
	if err := CheckName("name", n.Name); err != nil {
		return err
	}
	if len(n.GPUs) > maxGPUs {
		return fmt.Errorf("gpus: %d GPUs, at most %d", len(n.GPUs), maxGPUs)
	}
	seen := map[int]bool{}
	for i, g := range n.GPUs {
		switch {
		case g.Index < 0 || g.Index >= maxGPUs:
			return fmt.Errorf("gpus[%d].index: %d is outside 0..%d", i, g.Index, maxGPUs-1)
		case seen[g.Index]:
			return fmt.Errorf("gpus[%d].index: %d appears twice", i, g.Index)
		case g.Model == "":
			return fmt.Errorf("gpus[%d].model: empty", i)
		case g.MemoryBytes < 0:
			return fmt.Errorf("gpus[%d].memory_bytes: %d is negative", i, g.MemoryBytes)
		}
		seen[g.Index] = true
	}
	if n.CPUMilli < 0 {
		return fmt.Errorf("cpu_milli: %d is negative", n.CPUMilli)
	}
	if n.MemoryBytes < 0 {
		return fmt.Errorf("memory_bytes: %d is negative", n.MemoryBytes)
	}
	return nil
}

func (a RunningAttempt) validate() error {
	if err := CheckID("job", a.Job); err != nil {
		return err
	}
	if a.Attempt < 0 {
		return fmt.Errorf("attempt: %d is negative", a.Attempt)
	}
	return checkRank(a.Rank, a.WorldSize)
}

func checkRank(rank, worldSize int) error {
	if worldSize < 1 || worldSize > maxGPUs || rank < 0 || rank >= worldSize {
		return fmt.Errorf("rank %d, world_size %d: want 0 <= rank < world_size <= %d", rank, worldSize, maxGPUs)
	}
	return nil
}

// Validate names the first field that is wrong.
func (r EventsRequest) Validate() error {
	if err := CheckID("instance", r.Instance); err != nil {
		return err
	}
	return validateEvents(r.Events)
}

func validateEvents(events []Event) error {
	if len(events) > MaxEventsPerRequest {
		return fmt.Errorf("events: %d events, at most %d", len(events), MaxEventsPerRequest)
	}
	for i, e := range events {
		if err := e.Validate(); err != nil {
			return fmt.Errorf("events[%d]: %w", i, err)
		}
	}
	return nil
}

// Validate names the first field that is wrong.
func (e Event) Validate() error {
	switch e.Type {
	case EventStarted, EventExited, EventLost:
	case EventCheckpointed:
		if e.Checkpoint == nil {
			return errors.New("checkpoint: missing on a checkpointed event")
		}
		if e.Checkpoint.Step < 0 {
			return fmt.Errorf("checkpoint.step: %d is negative", e.Checkpoint.Step)
		}
	default:
		return fmt.Errorf("type: %q is not one of started, checkpointed, exited, lost", e.Type)
	}
	switch {
	case e.Seq <= 0:
		return fmt.Errorf("seq: %d: want a positive number", e.Seq)
	case e.Time.IsZero():
		return errors.New("time: missing")
	case e.Attempt < 0:
		return fmt.Errorf("attempt: %d is negative", e.Attempt)
	}
	if err := checkRank(e.Rank, e.WorldSize); err != nil {
		return err
	}
	return CheckID("job", e.Job)
}

// Validate names the first field that is wrong.
func (r CommandsResponse) Validate() error {
	for i, c := range r.Commands {
		if err := c.Validate(); err != nil {
			return fmt.Errorf("commands[%d]: %w", i, err)
		}
	}
	return nil
}

// Validate names the first field that is wrong.
func (c Command) Validate() error {
	if c.Seq <= 0 {
		return fmt.Errorf("seq: %d: want a positive number", c.Seq)
	}
	if err := CheckID("job", c.Job); err != nil {
		return err
	}
	if c.Attempt < 0 {
		return fmt.Errorf("attempt: %d is negative", c.Attempt)
	}
	switch c.Type {
	case CommandStart:
		if c.Start == nil {
			return errors.New("start: missing on a start command")
		}
		if err := c.Start.Validate(); err != nil {
			return fmt.Errorf("start: %w", err)
		}
	case CommandCheckpoint:
	case CommandLog:
		if c.Log == nil {
			return errors.New("log: missing on a log command")
		}
		if err := CheckID("log.id", c.Log.ID); err != nil {
			return err
		}
		if c.Log.MaxBytes < 1 || c.Log.MaxBytes > MaxLogBytes {
			return fmt.Errorf("log.max_bytes: %d is outside 1..%d", c.Log.MaxBytes, MaxLogBytes)
		}
	case CommandStop:
		if c.GraceS < 0 || c.GraceS > 7*24*3600 || c.GraceS != c.GraceS {
			return fmt.Errorf("grace_s: %g is outside 0..%d", c.GraceS, 7*24*3600)
		}
	default:
		return fmt.Errorf("type: %q is not one of start, checkpoint, stop, log", c.Type)
	}
	return nil
}

// Validate names the first field that is wrong.
func (s StartSpec) Validate() error {
	switch {
	case len(s.Command) == 0 || s.Command[0] == "":
		return errors.New("command: empty")
	case len(s.Command) > maxArgs:
		return fmt.Errorf("command: %d arguments, at most %d", len(s.Command), maxArgs)
	case len(s.GPUs) > maxGPUs:
		return fmt.Errorf("gpus: %d GPUs, at most %d", len(s.GPUs), maxGPUs)
	case s.CheckpointEveryS < 0 || s.CheckpointEveryS != s.CheckpointEveryS:
		return fmt.Errorf("checkpoint_every_s: %g is negative", s.CheckpointEveryS)
	case !(s.PowerLimitFraction >= 0 && s.PowerLimitFraction <= 1):
		return fmt.Errorf("power_limit_fraction: %g, want 0 (uncapped) to 1", s.PowerLimitFraction)
	}
	if err := checkRank(s.Rank, s.WorldSize); err != nil {
		return err
	}
	for i, g := range s.GPUs {
		if g < 0 || g >= maxGPUs {
			return fmt.Errorf("gpus[%d]: %d is outside 0..%d", i, g, maxGPUs-1)
		}
		if slices.Contains(s.GPUs[:i], g) {
			return fmt.Errorf("gpus[%d]: %d appears twice", i, g)
		}
	}
	for k := range s.Env {
		if err := checkEnvKey(k); err != nil {
			return fmt.Errorf("env: %w", err)
		}
	}
	if _, err := ParseSignal(s.CheckpointSignal); err != nil {
		return fmt.Errorf("checkpoint_signal: %w", err)
	}
	return nil
}

// checkEnvKey rejects names a job may not set: malformed ones, and those
// the agent sets itself.
func checkEnvKey(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return fmt.Errorf("%q is not a variable name", k)
	}
	if k == "CUDA_VISIBLE_DEVICES" || strings.HasPrefix(k, "PRESCIENT_") {
		return fmt.Errorf("%s is set by the agent, not by the job", k)
	}
	return nil
}

func CheckName(field, s string) error {
	if s == "" {
		return fmt.Errorf("%s: empty", field)
	}
	if len(s) > maxNameBytes {
		return fmt.Errorf("%s: %d bytes, at most %d", field, len(s), maxNameBytes)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("%s: %q holds %q; want letters, digits, '-', '.', '_'", field, s, c)
		}
	}
	return nil
}

// CheckID accepts what the collector accepts as a job ID: printable ASCII
// without spaces, at most maxIDBytes.
func CheckID(field, s string) error {
	if s == "" {
		return fmt.Errorf("%s: empty", field)
	}
	if len(s) > maxIDBytes {
		return fmt.Errorf("%s: %d bytes, at most %d", field, len(s), maxIDBytes)
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c > '~' {
			return fmt.Errorf("%s: %q holds a space or a non-printable byte", field, s)
		}
	}
	return nil
}

// ClusterNode is the node in the domain's terms; GPU models the catalog
// knows get its name and power limits.
func (n NodeInfo) ClusterNode() cluster.Node {
	node := cluster.Node{Name: n.Name, CPUMilli: n.CPUMilli, MemoryBytes: n.MemoryBytes, State: cluster.NodeReady,
		Topology: cluster.Topology{Rack: n.Rack, Leaf: n.Leaf}, Labels: maps.Clone(n.Labels)}
	for _, g := range n.GPUs {
		cg := cluster.NewGPU(g.Index, g.Model)
		if spec, ok := cluster.LookupGPUModel(g.Model); ok {
			cg.Model = spec.Model // the catalog's name, as jobs ask for it ("NVIDIA H100-SXM5-80GB" → "H100-SXM5-80GB")
		}
		cg.UUID, cg.NVLinkDomain, cg.MIGEnabled = g.UUID, g.NVLinkDomain, g.MIGEnabled
		if g.MemoryBytes > 0 {
			cg.MemoryBytes = g.MemoryBytes
		}
		node.GPUs = append(node.GPUs, cg)
	}
	return node
}
