package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// RESTConfig is the client configuration of a kubeconfig file, or the
// in-cluster one (the pod's ServiceAccount) when path is "".
func RESTConfig(path string) (*rest.Config, error) {
	if path == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (give --kubeconfig outside a cluster): %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return c, nil
}

// Election configures RunElected.
type Election struct {
	Client kubernetes.Interface
	// Namespace and Name of the coordination.k8s.io Lease.
	Namespace string
	Name      string
	// Identity names this replica (its pod name); it must differ between
	// replicas.
	Identity string
	// LeaseDuration (whole seconds), RenewDeadline and RetryPeriod are
	// client-go's; defaults 15s, 10s and 2s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Logger                                    *slog.Logger
}

// ErrLostLeadership is what RunElected returns when this replica stops
// leading while ctx lives: it must stop acting (and, in a StatefulSet,
// exit so that it restarts as a follower).
var ErrLostLeadership = errors.New("lost the leader election")

// RunElected waits until this replica holds the Lease, then runs run with
// a context that ends when leadership is lost (or ctx ends). Two replicas
// never run it at once while their clocks agree to within the lease's
// skew. It returns run's error, ErrLostLeadership, or nil when ctx ends.
func RunElected(ctx context.Context, e Election, run func(ctx context.Context) error) error {
	if e.Client == nil || e.Namespace == "" || e.Name == "" || e.Identity == "" {
		return errors.New("leader election: Client, Namespace, Name and Identity are required")
	}
	if e.LeaseDuration == 0 {
		e.LeaseDuration = 15 * time.Second
	}
	if e.RenewDeadline == 0 {
		e.RenewDeadline = 10 * time.Second
	}
	if e.RetryPeriod == 0 {
		e.RetryPeriod = 2 * time.Second
	}
	if e.LeaseDuration < time.Second || e.LeaseDuration%time.Second != 0 {
		return fmt.Errorf("leader election: lease duration %s: want whole seconds (the Lease stores seconds)", e.LeaseDuration)
	}
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.Namespace, Name: e.Name},
		Client:     e.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.Identity},
	}
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	var started, ranOut atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: e.LeaseDuration, RenewDeadline: e.RenewDeadline, RetryPeriod: e.RetryPeriod,
		ReleaseOnCancel: true, Name: e.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				started.Store(true)
				log.Info("leading", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity)
				err := run(lctx)
				ranOut.Store(lctx.Err() == nil) // it ended on its own, still leading
				done <- err
				cancel() // give the lease up
			},
			OnStoppedLeading: func() { log.Info("stopped leading", "lease", e.Namespace+"/"+e.Name, "identity", e.Identity) },
			OnNewLeader: func(id string) {
				if id != e.Identity {
					log.Info("following", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(inner) // returns when leadership is lost or inner ends; run's context ends with it
	if !started.Load() {
		return nil // ctx ended before this replica led
	}
	err = <-done
	if ranOut.Load() {
		return err
	}
	if ctx.Err() != nil {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ErrLostLeadership
}

// LabelLeader marks the control plane's pod that holds the Lease; the
// Service of deploy/kubernetes selects it, so the API's requests reach the
// replica that plans while the standby stays Ready for rollouts.
const LabelLeader = "prescient.io/leader"

// MarkLeader sets (leader) or removes LabelLeader on the pod ns/pod: a
// replica removes it when it starts, so a restarted container of an old
// leader is not selected, and sets it once it leads.
func MarkLeader(ctx context.Context, client kubernetes.Interface, ns, pod string, leader bool) error {
	var v any // JSON null removes the label
	if leader {
		v = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelLeader: v}}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Pods(ns).Patch(ctx, pod, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("label pod %s/%s %s=%v: %w", ns, pod, LabelLeader, leader, err)
	}
	return nil
}
