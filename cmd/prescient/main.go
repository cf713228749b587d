// Command prescient is the predictive GPU scheduler: control plane, node
// agent, collector, trainer and tools, one subcommand each.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "prescient:", err)
		os.Exit(1)
	}
}
