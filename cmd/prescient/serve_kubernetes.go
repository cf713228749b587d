package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/control"
)

// kubeOptions are serve's flags of --backend kubernetes.
type kubeOptions struct {
	kubeconfig     string
	namespace      string
	leaderElect    bool
	leaseNamespace string
	leaseName      string
	priorityTiers  map[string]string
}

func addKubeFlags(f *pflag.FlagSet, o *kubeOptions) {
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "--backend kubernetes: kubeconfig file (empty: the in-cluster ServiceAccount)")
	f.StringVar(&o.namespace, "namespace", "", "--backend kubernetes: schedule the pods of this namespace only (empty: all namespaces)")
	f.BoolVar(&o.leaderElect, "leader-elect", false, "--backend kubernetes: plan and act only while holding the Lease (--lease-namespace/--lease-name), so that replicas never both act")
	f.StringVar(&o.leaseNamespace, "lease-namespace", "", "namespace of the leader election's Lease (empty: $POD_NAMESPACE, else default)")
	f.StringVar(&o.leaseName, "lease-name", "prescient", "name of the leader election's Lease")
	f.StringToStringVar(&o.priorityTiers, "priority-tier", nil, "--backend kubernetes: CLASS=TIER,...: the tier of pods of a PriorityClass that carry no prescient.io/tier label (system-*-critical: production unless named)")
}

// validate checks the Kubernetes flags against --backend.
func (o *kubeOptions) validate(backend string) []error {
	var errs []error
	if backend != "kubernetes" && (o.kubeconfig != "" || o.namespace != "" || o.leaderElect) {
		errs = append(errs, fmt.Errorf("--kubeconfig, --namespace and --leader-elect need --backend kubernetes (not %s)", backend))
	}
	if o.leaderElect && o.leaseName == "" {
		errs = append(errs, errors.New("--lease-name: empty"))
	}
	if backend != "kubernetes" && len(o.priorityTiers) > 0 {
		errs = append(errs, fmt.Errorf("--priority-tier needs --backend kubernetes (not %s)", backend))
	}
	if _, err := o.classTiers(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// classTiers parses --priority-tier.
func (o *kubeOptions) classTiers() (map[string]cluster.Tier, error) {
	out := make(map[string]cluster.Tier, len(o.priorityTiers))
	var errs []error
	for class, name := range o.priorityTiers {
		t, err := cluster.ParseTier(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("--priority-tier %s=%s: %w", class, name, err))
		}
		out[class] = t
	}
	return out, errors.Join(errs...)
}

// newKubeBackend connects to the API server.
func newKubeBackend(o kubeOptions, g *globals) (*kubebackend.Backend, kubernetes.Interface, error) {
	cfg, err := kubebackend.RESTConfig(o.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	cfg.UserAgent = "prescient/" + version
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	tiers, err := o.classTiers()
	if err != nil {
		return nil, nil, err
	}
	b, err := kubebackend.New(kubebackend.Config{Client: client, Namespace: o.namespace, PriorityTiers: tiers, Logger: g.logger})
	if err != nil {
		return nil, nil, err
	}
	return b, client, nil
}

// runPlane runs the control loop: under the leader election when
// --leader-elect, else at once. A replica that loses the Lease returns
// kubebackend.ErrLostLeadership (serve exits; its StatefulSet restarts it
// as a follower).
func runPlane(ctx context.Context, g *globals, o kubeOptions, client kubernetes.Interface, plane *control.Plane) error {
	if !o.leaderElect {
		return plane.Run(ctx)
	}
	ns := o.leaseNamespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	if ns == "" {
		ns = "default"
	}
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("leader election: identity: %w", err)
	}
	// In a pod (POD_NAME and POD_NAMESPACE from the downward API), the
	// leader labels its pod for the Service; a replica unlabels itself
	// first, in case its container restarted after leading.
	pod, podNS := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	mark := func(ctx context.Context, leader bool) {
		if pod == "" || podNS == "" {
			return
		}
		if err := kubebackend.MarkLeader(ctx, client, podNS, pod, leader); err != nil {
			g.logger.Warn("leader label not written; the Service may not reach the leader", "leader", leader, "error", err)
		}
	}
	mark(ctx, false)
	err = kubebackend.RunElected(ctx, kubebackend.Election{Client: client, Namespace: ns, Name: o.leaseName,
		Identity: fmt.Sprintf("%s_%d", host, os.Getpid()), Logger: g.logger}, func(ctx context.Context) error {
		mark(ctx, true)
		return plane.Run(ctx)
	})
	// No longer the leader (or stopping): off the Service at once.
	unmark, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	mark(unmark, false)
	return err
}

// kubeBackend is the Kubernetes backend with the client serve's leader
// election uses.
type kubeBackend struct {
	*kubebackend.Backend
	client kubernetes.Interface
}
