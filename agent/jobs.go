package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/collector/nvml"
)

// The environment variables the agent sets for a job.
const (
	envPrefix        = "PRESCIENT_"
	EnvJobID         = "PRESCIENT_JOB_ID"
	EnvAttempt       = "PRESCIENT_ATTEMPT"
	EnvCheckpointDir = "PRESCIENT_CHECKPOINT_DIR"
	EnvCheckpointAck = "PRESCIENT_CHECKPOINT_ACK"
	EnvRank          = "PRESCIENT_RANK"
	EnvWorldSize     = "PRESCIENT_WORLD_SIZE"
	EnvResumeStep    = "PRESCIENT_RESUME_STEP"
	EnvResumePath    = "PRESCIENT_RESUME_PATH"
)

// attempt is one attempt (this node's rank of it) the agent started.
type attempt struct {
	rec record
	sig syscall.Signal
	// supervisor is the job's supervisor, a child of this agent; nil for
	// an attempt taken over from an earlier agent.
	supervisor *exec.Cmd
	// kill fires SIGKILL at the end of a stop's grace (rec.KillAt).
	kill *time.Timer
	// lastAck is the acknowledgement last reported.
	lastAck protocol.Ack
}

// JobInfo is an attempt as Jobs lists it.
type JobInfo struct {
	Job       string
	Attempt   int
	Rank      int
	PID       int
	GPUs      []int
	Dir       string // working directory; the log is Dir/job.log
	StartedAt time.Time
	Ended     bool
	ExitCode  int
}

// Jobs lists the attempts the agent knows, running or ended, oldest first.
func (a *Agent) Jobs() []JobInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []JobInfo
	for _, p := range a.attempts {
		r := p.rec
		out = append(out, JobInfo{Job: r.Job, Attempt: r.Attempt, Rank: r.Rank, PID: r.PID, GPUs: slices.Clone(r.GPUs),
			Dir: r.Dir, StartedAt: r.StartedAt, Ended: r.Ended, ExitCode: r.ExitCode})
	}
	slices.SortFunc(out, func(x, y JobInfo) int { return x.StartedAt.Compare(y.StartedAt) })
	return out
}

// Running lists the attempts whose processes run.
func (a *Agent) Running() []protocol.RunningAttempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runningLocked()
}

// runningLocked is Running; a.mu is held.
func (a *Agent) runningLocked() []protocol.RunningAttempt {
	var out []protocol.RunningAttempt
	for _, p := range a.attempts {
		if !p.rec.Ended {
			out = append(out, protocol.RunningAttempt{Job: p.rec.Job, Attempt: p.rec.Attempt, Rank: p.rec.Rank, WorldSize: p.rec.WorldSize})
		}
	}
	slices.SortFunc(out, func(x, y protocol.RunningAttempt) int {
		return strings.Compare(x.Job+"\x00"+strconv.Itoa(x.Attempt), y.Job+"\x00"+strconv.Itoa(y.Attempt))
	})
	return out
}

// JobOfPID implements collector.JobRegistry: a process belongs to a job
// when it, or one of its ancestors, leads the job's process group or is in
// it.
func (a *Agent) JobOfPID(pid int) (string, bool) {
	for range 64 {
		if pid <= 1 {
			return "", false
		}
		a.mu.Lock()
		p, ok := a.byPID[pid]
		a.mu.Unlock()
		if ok {
			return p.rec.Job, true
		}
		st, err := readProcStat(a.cfg.ProcRoot, pid)
		if err != nil {
			return "", false
		}
		a.mu.Lock()
		p, ok = a.byPID[st.PGRP]
		a.mu.Unlock()
		if ok {
			return p.rec.Job, true
		}
		pid = st.PPID
	}
	return "", false
}

// LabelsOfJob implements collector.JobLabels: the labels of the job's
// newest attempt on this node, nil for a job it does not run.
func (a *Agent) LabelsOfJob(job string) map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var labels map[string]string
	newest := 0
	for key, p := range a.attempts {
		if key.job == job && key.attempt > newest {
			labels, newest = p.rec.Labels, key.attempt
		}
	}
	return labels
}

// handle carries out one command.
func (a *Agent) handle(c protocol.Command) {
	log := a.log.With("job", c.Job, "attempt", c.Attempt, "seq", c.Seq)
	switch c.Type {
	case protocol.CommandStart:
		a.start(c)
	case protocol.CommandCheckpoint:
		p := a.find(c.Job, c.Attempt)
		if p == nil {
			log.Warn("checkpoint asked for an attempt that does not run here")
			return
		}
		if err := a.signal(p, p.sig, false); err != nil {
			log.Warn("checkpoint signal not sent", "error", err)
			return
		}
		log.Info("checkpoint requested", "signal", p.sig.String())
	case protocol.CommandStop:
		p := a.find(c.Job, c.Attempt)
		if p == nil {
			log.Info("stop asked for an attempt that does not run here")
			return
		}
		a.stop(p, time.Duration(c.GraceS*float64(time.Second)))
	}
}

// find returns the running attempt of job (attempt 0: any attempt).
func (a *Agent) find(job string, att int) *attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, p := range a.attempts {
		if k.job == job && (att == 0 || k.attempt == att) && !p.rec.Ended {
			return p
		}
	}
	return nil
}

// start starts the attempt unless it was started before (by this agent or
// one before it on the same work directory).
func (a *Agent) start(c protocol.Command) {
	s := c.Start
	key := attemptKey{c.Job, c.Attempt}
	log := a.log.With("job", c.Job, "attempt", c.Attempt, "rank", s.Rank)
	sig, err := protocol.ParseSignal(s.CheckpointSignal)
	if err != nil { // Validate checked it already
		log.Error("start refused", "error", err)
		return
	}
	jobDir := a.jobDir(c.Job)
	dir := attemptDir(jobDir, c.Attempt)
	p := &attempt{sig: sig, rec: record{
		Job: c.Job, Attempt: c.Attempt, Rank: s.Rank, WorldSize: s.WorldSize, GPUs: slices.Clone(s.GPUs),
		StartedAt: time.Now().UTC(), Dir: dir, AckPath: filepath.Join(dir, "checkpoint.ack"), StatusPath: dir + ".status.json",
		CheckpointSignal: s.CheckpointSignal, CheckpointEveryS: s.CheckpointEveryS, Labels: maps.Clone(s.Labels),
		PowerLimitFraction: s.PowerLimitFraction,
	}}

	// 1. Claim the attempt and write the claim down before anything runs:
	// an agent that dies from here on never starts it again.
	a.mu.Lock()
	if _, ok := a.attempts[key]; ok {
		a.mu.Unlock()
		log.Info("start ignored: this attempt was started before")
		return
	}
	a.attempts[key] = p
	err = a.saveLocked()
	a.mu.Unlock()
	if err != nil {
		a.fail(p, 127, fmt.Sprintf("state file: %v", err))
		return
	}

	// 2. Its directories, log, environment, and the process in its own
	// process group.
	ckptDir := filepath.Join(jobDir, "checkpoints")
	if err := errors.Join(os.MkdirAll(dir, 0o755), os.MkdirAll(ckptDir, 0o755)); err != nil {
		a.fail(p, 127, fmt.Sprintf("work dir: %v", err))
		return
	}
	os.Remove(p.rec.AckPath)
	logFile, err := os.OpenFile(filepath.Join(dir, jobLogName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		a.fail(p, 127, fmt.Sprintf("log file: %v", err))
		return
	}
	defer logFile.Close() // the supervisor holds its own descriptor
	sup, err := a.startSupervised(p, s.Command, dir, logFile, a.jobEnv(c, ckptDir, p.rec.AckPath))
	if err != nil {
		a.fail(p, 127, err.Error())
		return
	}

	// 3. Record the processes, report the start, and watch the job.
	a.mu.Lock()
	p.supervisor = sup
	if err := a.saveLocked(); err != nil {
		log.Error("state file not written: a restarted agent may not know this attempt runs", "error", err)
	}
	a.mu.Unlock()
	log.Info("started", "pid", p.rec.PID, "supervisor_pid", p.rec.SupervisorPID, "gpus", s.GPUs, "dir", dir)
	a.assignLoad(p)
	a.emit(a.event(p, protocol.EventStarted))
	a.watch(p)
}

// startReportTimeout bounds the wait for a supervisor's start report.
const startReportTimeout = 30 * time.Second

// startSupervised starts the attempt's command through its supervisor
// (Supervise), in a session of its own so that both outlive the agent, and
// fills in the processes of p.rec (a.byPID too). An error is the reason the
// command did not start; the power cap is lifted again then.
func (a *Agent) startSupervised(p *attempt, argv []string, dir string, logFile *os.File, env []string) (*exec.Cmd, error) {
	os.Remove(p.rec.StatusPath)
	cmd := exec.Command(a.cfg.Supervisor, append([]string{SuperviseArg, p.rec.StatusPath, "--"}, argv...)...)
	cmd.Args[0] = "prescient-supervise"
	cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = dir, logFile, logFile, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	defer rd.Close()
	cmd.ExtraFiles = []*os.File{wr}
	a.capPower(p) // before the job draws anything
	err = cmd.Start()
	wr.Close()
	if err != nil {
		a.uncapPower(p)
		fmt.Fprintf(logFile, "prescient agent: start the supervisor %s: %v\n", a.cfg.Supervisor, err)
		return nil, fmt.Errorf("start the supervisor: %w", err)
	}
	rep, err := readStartReport(rd, startReportTimeout)
	if err == nil && rep.Error != "" {
		err = fmt.Errorf("start: %s", rep.Error)
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		a.uncapPower(p)
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	p.rec.SupervisorPID, p.rec.PID = cmd.Process.Pid, rep.PID
	if st, err := readProcStat(a.cfg.ProcRoot, p.rec.SupervisorPID); err == nil {
		p.rec.SupervisorStartTicks = st.StartTicks
	}
	if st, err := readProcStat(a.cfg.ProcRoot, p.rec.PID); err == nil {
		p.rec.StartTicks = st.StartTicks
	}
	a.byPID[p.rec.PID] = p
	return cmd, nil
}

// jobEnv is the job's environment: the base, the job's own, then what the
// agent sets.
func (a *Agent) jobEnv(c protocol.Command, ckptDir, ackPath string) []string {
	s := c.Start
	env := slices.Clone(a.cfg.Env)
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+s.Env[k])
	}
	gpus := make([]string, len(s.GPUs))
	for i, g := range s.GPUs {
		gpus[i] = strconv.Itoa(g)
	}
	env = append(env,
		"CUDA_VISIBLE_DEVICES="+strings.Join(gpus, ","),
		EnvJobID+"="+c.Job,
		EnvAttempt+"="+strconv.Itoa(c.Attempt),
		EnvCheckpointDir+"="+ckptDir,
		EnvCheckpointAck+"="+ackPath,
		EnvRank+"="+strconv.Itoa(s.Rank),
		EnvWorldSize+"="+strconv.Itoa(s.WorldSize),
	)
	if s.ResumePath != "" {
		env = append(env, EnvResumeStep+"="+strconv.FormatInt(s.ResumeStep, 10), EnvResumePath+"="+s.ResumePath)
	}
	return env
}

// fail ends an attempt that did not start.
func (a *Agent) fail(p *attempt, code int, msg string) {
	a.log.Error("job not started", "job", p.rec.Job, "attempt", p.rec.Attempt, "reason", msg)
	a.mu.Lock()
	p.rec.Ended, p.rec.EndedAt, p.rec.ExitCode = true, time.Now().UTC(), code
	if err := a.saveLocked(); err != nil {
		a.log.Error("state file not written", "error", err)
	}
	e := a.event(p, protocol.EventExited)
	e.ExitCode, e.Message = code, msg
	a.emit(e) // under a.mu, as in ended
	a.mu.Unlock()
}

// watch follows a started attempt until its process ends: its
// acknowledgement file, its periodic checkpoint requests and its exit,
// which its supervisor ending tells (Wait on a child, else polling its PID).
func (a *Agent) watch(p *attempt) {
	a.mu.Lock()
	r := p.rec
	a.mu.Unlock()
	exited := make(chan outcome, 1)
	if p.supervisor != nil {
		go func() {
			p.supervisor.Wait()
			exited <- a.outcomeOf(r)
		}()
	} else {
		pid, ticks := r.watched()
		go func() {
			t := time.NewTicker(a.cfg.AckPoll)
			defer t.Stop()
			for range t.C {
				if !alive(a.cfg.ProcRoot, pid, ticks) {
					exited <- a.outcomeOf(r)
					return
				}
			}
		}()
	}
	go func() {
		ackTick := time.NewTicker(a.cfg.AckPoll)
		defer ackTick.Stop()
		var every <-chan time.Time
		if p.rec.CheckpointEveryS > 0 {
			t := time.NewTicker(time.Duration(p.rec.CheckpointEveryS * float64(time.Second)))
			defer t.Stop()
			every = t.C
		}
		for {
			select {
			case <-ackTick.C:
				a.checkAck(p)
			case <-every:
				if err := a.signal(p, p.sig, false); err != nil {
					a.log.Warn("periodic checkpoint signal not sent", "job", p.rec.Job, "error", err)
				}
			case o := <-exited:
				a.checkAck(p) // a checkpoint written on the way out comes first
				a.ended(p, o)
				return
			}
		}
	}()
}

// checkAck reports the acknowledgement file when it says something new.
func (a *Agent) checkAck(p *attempt) {
	ack, ok, err := protocol.ReadAck(p.rec.AckPath)
	if err != nil {
		a.log.Warn("checkpoint acknowledgement unreadable", "job", p.rec.Job, "error", err)
		return
	}
	if !ok || ack == p.lastAck {
		return
	}
	p.lastAck = ack
	at := time.Now().UTC()
	if fi, err := os.Stat(p.rec.AckPath); err == nil {
		at = fi.ModTime().UTC()
	}
	e := a.event(p, protocol.EventCheckpointed)
	e.Time = at
	e.Checkpoint = &protocol.CheckpointInfo{Time: at, Step: ack.Step, Path: ack.Path}
	a.log.Info("checkpointed", "job", p.rec.Job, "attempt", p.rec.Attempt, "step", ack.Step, "path", ack.Path)
	a.emit(e)
}

// outcome is how an attempt's process ended.
type outcome struct {
	code int // -1: killed by a signal, or unknown
	at   time.Time
	msg  string // the signal that killed it, or why the code is unknown
}

// watched is the process whose end is the attempt's: its supervisor, or
// the job's own for an attempt started without one.
func (r *record) watched() (pid int, startTicks uint64) {
	if r.SupervisorPID > 0 {
		return r.SupervisorPID, r.SupervisorStartTicks
	}
	return r.PID, r.StartTicks
}

// outcomeOf reads how an attempt whose supervisor ended ended: the exit
// status its supervisor wrote, else -1 and why it is unknown.
func (a *Agent) outcomeOf(r record) outcome {
	now := time.Now().UTC()
	if r.StatusPath == "" {
		return outcome{code: -1, at: now, msg: "exit status unknown: the process was started by an agent without a supervisor"}
	}
	st, ok, err := readExitStatus(r.StatusPath)
	switch {
	case err != nil:
		return outcome{code: -1, at: now, msg: fmt.Sprintf("exit status unknown: %v", err)}
	case !ok:
		return outcome{code: -1, at: now, msg: fmt.Sprintf("exit status unknown: its supervisor (pid %d) ended without writing %s", r.SupervisorPID, r.StatusPath)}
	}
	o := outcome{code: st.ExitCode, at: st.EndedAt.UTC(), msg: ""}
	if st.Signal != "" {
		o.msg = "killed by " + st.Signal
	}
	if o.at.IsZero() {
		o.at = now
	}
	return o
}

// ended records and reports the end of an attempt's process.
func (a *Agent) ended(p *attempt, o outcome) {
	// The cap goes first: once the exit is out, the control plane may
	// start another job on these GPUs, with a cap of its own.
	a.uncapPower(p)
	a.mu.Lock()
	if p.kill != nil {
		p.kill.Stop()
	}
	delete(a.byPID, p.rec.PID)
	// The exit is queued while a.mu is held, so that a registration sees
	// either the attempt running or its exit queued, never neither.
	e := a.endLocked(p, o)
	a.mu.Unlock()
	a.releaseLoad(p)
	a.log.Info("exited", "job", p.rec.Job, "attempt", p.rec.Attempt, "exit_code", o.code, "stopped", e.Stopped, "message", o.msg)
}

// endLocked marks the attempt ended, writes the state file and queues the
// exit; a.mu is held.
func (a *Agent) endLocked(p *attempt, o outcome) protocol.Event {
	p.rec.Ended, p.rec.EndedAt, p.rec.ExitCode, p.rec.Stopped = true, o.at, o.code, p.rec.Stopping
	p.rec.ExitMessage = o.msg
	if err := a.saveLocked(); err != nil {
		a.log.Error("state file not written", "error", err)
	}
	return a.emitExitLocked(p)
}

// emitExitLocked queues the end of an ended attempt, as its record says:
// its exit, or that it was lost (record.Lost); a.mu is held.
func (a *Agent) emitExitLocked(p *attempt) protocol.Event {
	if p.rec.Lost {
		e := a.event(p, protocol.EventLost)
		e.Time, e.Message = p.rec.EndedAt, p.rec.ExitMessage
		a.emit(e)
		return e
	}
	e := a.event(p, protocol.EventExited)
	e.Time, e.ExitCode, e.Stopped, e.Message = p.rec.EndedAt, p.rec.ExitCode, p.rec.Stopped, p.rec.ExitMessage
	a.emit(e)
	return e
}

// reported marks the ends (exits, losses) among events delivered to the
// control plane, so that no later agent reports them again.
func (a *Agent) reported(events []protocol.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for _, e := range events {
		if e.Type != protocol.EventExited && e.Type != protocol.EventLost {
			continue
		}
		if p := a.attempts[attemptKey{e.Job, e.Attempt}]; p != nil && p.rec.Ended && !p.rec.Reported {
			p.rec.Reported, changed = true, true
		}
	}
	if changed {
		if err := a.saveLocked(); err != nil {
			a.log.Error("state file not written", "error", err)
		}
	}
}

// StopAll stops every attempt that runs here, as a stop command does
// (SIGTERM, which a job answers by checkpointing, and SIGKILL after
// grace), and waits until they ended or ctx ends: a demo that started the
// jobs leaves none behind it. Exits not delivered by then are reported by
// the next agent on the work directory.
func (a *Agent) StopAll(ctx context.Context, grace time.Duration) (stopped int, err error) {
	a.mu.Lock()
	var ps []*attempt
	for _, p := range a.attempts {
		if !p.rec.Ended {
			ps = append(ps, p)
		}
	}
	a.mu.Unlock()
	for _, p := range ps {
		a.stop(p, grace)
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		a.mu.Lock()
		left := 0
		for _, p := range ps {
			if !p.rec.Ended {
				left++
			}
		}
		a.mu.Unlock()
		if left == 0 {
			return len(ps), nil
		}
		select {
		case <-ctx.Done():
			return len(ps) - left, fmt.Errorf("%d of %d jobs still running: %w", left, len(ps), ctx.Err())
		case <-t.C:
		}
	}
}

// stop sends SIGTERM to the attempt's process group and SIGKILL after
// grace; asking again changes nothing.
func (a *Agent) stop(p *attempt, grace time.Duration) {
	a.mu.Lock()
	if p.rec.Stopping || p.rec.Ended {
		a.mu.Unlock()
		return
	}
	// Written down first: an agent that takes the attempt over reports
	// its exit as stopped and still kills it at the end of the grace.
	p.rec.Stopping, p.rec.KillAt = true, time.Now().Add(grace).UTC()
	if err := a.saveLocked(); err != nil {
		a.log.Error("state file not written", "error", err)
	}
	a.mu.Unlock()
	log := a.log.With("job", p.rec.Job, "attempt", p.rec.Attempt)
	if err := a.signal(p, syscall.SIGTERM, true); err != nil {
		log.Warn("SIGTERM not sent", "error", err)
	}
	log.Info("stopping", "grace", grace)
	a.armKill(p)
}

// armKill sends SIGKILL to the attempt's process group at rec.KillAt.
func (a *Agent) armKill(p *attempt) {
	a.mu.Lock()
	defer a.mu.Unlock()
	grace := time.Until(p.rec.KillAt)
	p.kill = time.AfterFunc(grace, func() {
		if err := a.signal(p, syscall.SIGKILL, true); err == nil {
			a.log.Warn("grace period over: SIGKILL sent", "job", p.rec.Job, "attempt", p.rec.Attempt, "kill_at", p.rec.KillAt)
		}
	})
}

// signal sends sig to the attempt's leader process, or with group to its
// whole process group, after checking that the PID still is that process.
func (a *Agent) signal(p *attempt, sig syscall.Signal, group bool) error {
	a.mu.Lock()
	pid, ticks, ended := p.rec.PID, p.rec.StartTicks, p.rec.Ended
	a.mu.Unlock()
	if ended || pid <= 0 {
		return errors.New("the process has ended")
	}
	if ticks != 0 && !alive(a.cfg.ProcRoot, pid, ticks) {
		return errors.New("the process has ended")
	}
	if group {
		pid = -pid
	}
	return syscall.Kill(pid, sig)
}

// adopt takes over an attempt from the state file (New, before the agent
// runs anything else): one that runs is returned, to be watched once
// every record is adopted; one that ended while no agent watched is
// reported with the exit status its supervisor wrote.
func (a *Agent) adopt(r record) *attempt {
	sig, err := protocol.ParseSignal(r.CheckpointSignal)
	if err != nil {
		sig = syscall.SIGUSR1
	}
	p := &attempt{rec: r, sig: sig}
	a.attempts[attemptKey{r.Job, r.Attempt}] = p
	if r.Ended {
		if !r.Reported {
			a.log.Info("reporting an exit the control plane may not have", "job", r.Job, "attempt", r.Attempt, "exit_code", r.ExitCode)
			a.checkAck(p) // the checkpoint it wrote on the way out first
			a.emitExitLocked(p)
		}
		return nil
	}
	log := a.log.With("job", r.Job, "attempt", r.Attempt)
	if r.PID <= 0 {
		// An agent stopped while starting it, before it knew its process:
		// its supervisor may run it still, or have written how it ended,
		// or it never started.
		if found := a.findSupervised(r); found.PID > 0 {
			log.Info("found the process of an attempt its agent stopped while starting", "pid", found.PID, "supervisor_pid", found.SupervisorPID)
			r = found
			p.rec = r
			if err := a.saveLocked(); err != nil {
				log.Error("state file not written", "error", err)
			}
		} else if _, ok, _ := readExitStatus(r.StatusPath); !ok {
			log.Warn("an attempt claimed but never started is reported lost: its agent stopped while starting it")
			p.rec.Lost = true
			a.endLocked(p, outcome{code: -1, at: time.Now().UTC(), msg: "never started: its agent stopped while starting it"})
			return nil
		}
	}
	if pid, ticks := r.watched(); alive(a.cfg.ProcRoot, pid, ticks) {
		a.byPID[r.PID] = p
		p.lastAck, _, _ = protocol.ReadAck(r.AckPath)
		log.Info("took over a running job", "pid", r.PID, "supervisor_pid", r.SupervisorPID)
		a.assignLoad(p)
		if r.Stopping {
			a.armKill(p)
		}
		return p
	}
	o := a.outcomeOf(r)
	log.Info("a job ended while no agent watched it", "exit_code", o.code, "ended_at", o.at, "message", o.msg)
	a.checkAck(p) // the checkpoint it wrote on the way out first
	a.endLocked(p, o)
	return nil
}

// findSupervised finds the supervisor of an attempt that its agent
// stopped while starting (its command line names the attempt's status
// file) and the job it runs (the supervisor's child), and returns the
// record with their processes; PID stays 0 when there is none.
func (a *Agent) findSupervised(r record) record {
	if r.StatusPath == "" {
		return r
	}
	entries, err := os.ReadDir(a.cfg.ProcRoot)
	if err != nil {
		return r
	}
	want := []byte("\x00" + SuperviseArg + "\x00" + r.StatusPath + "\x00")
	var sup int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join(a.cfg.ProcRoot, e.Name(), "cmdline")); err == nil && bytes.Contains(cmd, want) {
			sup = pid
			break
		}
	}
	if sup == 0 {
		return r
	}
	st, err := readProcStat(a.cfg.ProcRoot, sup)
	if err != nil {
		return r
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if js, err := readProcStat(a.cfg.ProcRoot, pid); err == nil && js.PPID == sup {
			r.SupervisorPID, r.SupervisorStartTicks, r.PID, r.StartTicks = sup, st.StartTicks, pid, js.StartTicks
			return r
		}
	}
	return r
}

func (a *Agent) event(p *attempt, t protocol.EventType) protocol.Event {
	return protocol.Event{Type: t, Time: time.Now().UTC(), Job: p.rec.Job, Attempt: p.rec.Attempt, Rank: p.rec.Rank, WorldSize: p.rec.WorldSize}
}

func (a *Agent) statePath() string { return filepath.Join(a.cfg.WorkDir, stateFileName) }

// saveLocked writes the state file; a.mu is held.
func (a *Agent) saveLocked() error {
	recs := make([]record, 0, len(a.attempts))
	for _, p := range a.attempts {
		recs = append(recs, p.rec)
	}
	return saveState(a.statePath(), recs)
}

// exitCode is the process's exit status, -1 when a signal killed it (or
// it did not start).
func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1
	}
	return ps.ExitCode()
}

// jobDir is where a job's attempts and checkpoints live on this node.
func (a *Agent) jobDir(job string) string { return filepath.Join(a.cfg.WorkDir, "jobs", safeName(job)) }

// attemptDir is an attempt's working directory in its job's directory; its
// log is jobLogName there.
func attemptDir(jobDir string, attempt int) string {
	return filepath.Join(jobDir, fmt.Sprintf("attempt-%d", attempt))
}

// jobLogName is the name of an attempt's log in its directory.
const jobLogName = "job.log"

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// safeName turns a job ID into a directory name; IDs that had to change get
// a hash suffix so that two never share a directory.
func safeName(id string) string {
	s := unsafeChars.ReplaceAllString(id, "_")
	if s == id && s != "." && s != ".." {
		return s
	}
	h := sha256.Sum256([]byte(id))
	return s + "-" + hex.EncodeToString(h[:4])
}

// assignLoad tells the simulated GPUs (Config.Load) that the attempt runs
// on them.
func (a *Agent) assignLoad(p *attempt) {
	if a.cfg.Load == nil {
		return
	}
	for _, g := range a.gpusOf(p.rec.GPUs) {
		err := a.cfg.Load.Assign(g.UUID, nvml.Assignment{JobID: p.rec.Job, Util: SimulatedUtil,
			MemBytes: uint64(float64(g.MemoryBytes) * SimulatedMemFraction), PIDs: []int{p.rec.PID}})
		if err != nil {
			a.log.Warn("simulated GPU not told about the job", "gpu", g.UUID, "error", err)
		}
	}
}

// capped says whether the attempt asked for a power cap.
func (r *record) capped() bool { return r.PowerLimitFraction > 0 && r.PowerLimitFraction < 1 }

// capPower sets the attempt's GPUs' power limits to its cap
// (StartSpec.PowerLimitFraction) through Config.Power. A limit that cannot
// be set is logged and the job runs uncapped: a cap saves energy, it is
// not a reason to fail a job.
func (a *Agent) capPower(p *attempt) {
	if a.cfg.Power == nil || !p.rec.capped() {
		return
	}
	f := p.rec.PowerLimitFraction
	for _, g := range a.gpusOf(p.rec.GPUs) {
		w, err := a.cfg.Power.SetPowerLimitFraction(g.UUID, f)
		if err != nil {
			a.log.Warn("power cap not set; the job runs uncapped on this GPU", "job", p.rec.Job, "gpu", g.UUID, "fraction", f, "error", err)
			continue
		}
		a.log.Info("power capped", "job", p.rec.Job, "gpu", g.UUID, "limit_w", w)
	}
}

// settlePowerLimits, after a restart has adopted the state file's
// attempts, caps the GPUs of the running attempts that asked for a cap
// (again: the GPU may have been reset meanwhile) and sets back to default
// the GPUs that only ended attempts had capped (an agent that died between
// an exit and its reset left them capped).
func (a *Agent) settlePowerLimits() {
	if a.cfg.Power == nil {
		return
	}
	running, ended := map[int]bool{}, map[int]bool{}
	for _, p := range a.attempts {
		if !p.rec.capped() {
			continue
		}
		for _, g := range p.rec.GPUs {
			if p.rec.Ended {
				ended[g] = true
			} else {
				running[g] = true
			}
		}
		if !p.rec.Ended {
			a.capPower(p)
		}
	}
	var reset []int
	for g := range ended {
		if !running[g] {
			reset = append(reset, g)
		}
	}
	a.resetPower(reset, "")
}

// uncapPower sets the attempt's GPUs back to their default power limit.
func (a *Agent) uncapPower(p *attempt) {
	if a.cfg.Power != nil && p.rec.capped() {
		a.resetPower(p.rec.GPUs, p.rec.Job)
	}
}

// resetPower sets the GPUs of those indices back to their default power
// limit, logging the ones that refuse (job names whose cap it lifts, ""
// for none).
func (a *Agent) resetPower(gpus []int, job string) {
	for _, g := range a.gpusOf(gpus) {
		if err := a.cfg.Power.ResetPowerLimit(g.UUID); err != nil {
			a.log.Warn("power limit not reset", "job", job, "gpu", g.UUID, "error", err)
		}
	}
}

// releaseLoad gives the attempt's simulated GPUs back to their idle load.
func (a *Agent) releaseLoad(p *attempt) {
	if a.cfg.Load == nil {
		return
	}
	for _, g := range a.gpusOf(p.rec.GPUs) {
		a.cfg.Load.Release(g.UUID)
	}
}

// gpusOf are the node's GPUs of those indices that have a UUID.
func (a *Agent) gpusOf(idxs []int) []protocol.GPUInfo {
	var out []protocol.GPUInfo
	for _, idx := range idxs {
		if g, ok := a.gpu(idx); ok && g.UUID != "" {
			out = append(out, g)
		}
	}
	return out
}

func (a *Agent) gpu(index int) (protocol.GPUInfo, bool) {
	for _, g := range a.cfg.Node.GPUs {
		if g.Index == index {
			return g, true
		}
	}
	return protocol.GPUInfo{}, false
}
