// Package agent is the node agent (DESIGN.md section 6); what it says to
// the control plane is agent/protocol.
//
// An Agent runs on each GPU host. It registers the host's GPUs and
// topology with the control plane's hub (backend/agenthub), long-polls its
// commands (start, checkpoint, stop), runs each job in its own process
// group with CUDA_VISIBLE_DEVICES set to its GPUs, and posts what happens
// to them as events. Each job's parent is a supervisor (Supervise) that
// outlives the agent and writes the job's exit status to a file, so that an
// agent restarted meanwhile reports the real exit code. It starts each
// (job, attempt) at most once, also across its own restarts (a state file
// in its work directory), keeps jobs running and events queued while the
// control plane is away, and re-registers with its running jobs when it is
// back. It is a
// collector.JobRegistry, so a collector in the same process names the job
// of every GPU process.
package agent
