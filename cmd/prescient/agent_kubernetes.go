package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/collector/nvml"
)

// kubeAgentOptions are agent's flags of --kubernetes.
type kubeAgentOptions struct {
	enabled    bool
	kubeconfig string
	ackTimeout time.Duration
	procRoot   string
}

func addKubeAgentFlags(f *pflag.FlagSet, o *kubeAgentOptions) {
	f.BoolVar(&o.enabled, "kubernetes", false, "run as the node agent of serve --backend kubernetes: relay checkpoint requests to the pods on --node")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "--kubernetes: kubeconfig file (empty: the in-cluster ServiceAccount)")
	f.DurationVar(&o.ackTimeout, "ack-timeout", 10*time.Minute, "--kubernetes: how long a workload may take to acknowledge a checkpoint")
	f.StringVar(&o.procRoot, "proc", "/proc", "--kubernetes: the host's proc file system (the pods' processes)")
}

// kubeAgentReport is what agent --kubernetes prints when it stops.
type kubeAgentReport struct {
	Node string `json:"node"`
	kubebackend.NodeAgentStats
	DurationS float64 `json:"duration_s"`
}

func (r kubeAgentReport) writeTable(w io.Writer) error {
	t := newTable(w)
	t.row("node", r.Node)
	t.row("checkpoints_acknowledged", r.Acknowledged)
	t.row("checkpoints_not_relayed", r.Failed)
	t.row("duration_s", fmt.Sprintf("%.1f", r.DurationS))
	return t.flush()
}

// runKubeAgent is agent --kubernetes.
func runKubeAgent(ctx context.Context, g *globals, o agentOptions, stdout io.Writer) error {
	switch {
	case o.node == "":
		return errors.New("--node: want the node's name (in a DaemonSet: spec.nodeName through the downward API)")
	case o.kube.ackTimeout <= 0:
		return fmt.Errorf("--ack-timeout %s: want a positive duration", o.kube.ackTimeout)
	}
	mode, err := nvml.ParseMode(o.nvml)
	if err != nil {
		return fmt.Errorf("--nvml: %w", err)
	}
	if o.collect {
		sink := o.sink
		sink.nvml, sink.node = o.nvml, o.node
		if _, err := sink.validate(); err != nil {
			return err
		}
	}
	start := time.Now()
	cfg, err := kubebackend.RESTConfig(o.kube.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.UserAgent = "prescient-agent/" + version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("--kubeconfig: %w", err)
	}
	a, err := kubebackend.NewNodeAgent(kubebackend.NodeAgentConfig{Client: client, Node: o.node, AckTimeout: o.kube.ackTimeout,
		ProcRoot: o.kube.procRoot, Logger: g.logger})
	if err != nil {
		return err
	}
	var collectErr chan error
	if o.collect {
		host, _, _, err := agentNode(mode, o, false) // pods' load is not the agent's to assign
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		defer host.Close()
		collectErr = make(chan error, 1)
		go func() { collectErr <- runAgentCollector(ctx, g, o.sink, host, a) }()
	}
	g.logger.Info("kubernetes node agent starting", "component", "agent", "node", o.node, "collect", o.collect)
	runErr := a.Run(ctx)
	if collectErr != nil {
		if err := <-collectErr; err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("agent: --collect: %w", err))
		}
	}
	if runErr != nil {
		return runErr
	}
	return g.print(stdout, kubeAgentReport{Node: o.node, NodeAgentStats: a.Stats(), DurationS: time.Since(start).Seconds()})
}
