// Command prescient is the predictive GPU scheduler: control plane, node
// agent, collector, trainer and tools, one subcommand each.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/prescient-sched/prescient/agent"
)

func main() {
	// The node agent starts every job through its own executable as the
	// job's supervisor: that run is no command, and nothing else starts.
	if len(os.Args) > 1 && os.Args[1] == agent.SuperviseArg {
		os.Exit(agent.Supervise(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "prescient:", err)
		os.Exit(1)
	}
}
