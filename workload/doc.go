// Package workload is a small training-like program for tests and demos of
// the node agent: it runs a number of steps of a fixed length, checkpoints
// atomically into PRESCIENT_CHECKPOINT_DIR, resumes from the newest valid
// checkpoint there, and follows the agent's protocol (DESIGN.md section 6):
// the checkpoint signal (SIGUSR1) writes a checkpoint and then the
// acknowledgement file PRESCIENT_CHECKPOINT_ACK; SIGTERM checkpoints and
// exits with ExitStopped. `prescient workload` is its command.
package workload
