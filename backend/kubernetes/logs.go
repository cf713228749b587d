package kubernetes

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/prescient-sched/prescient/agent/protocol"
	"github.com/prescient-sched/prescient/cluster"
	"github.com/prescient-sched/prescient/executor"
)

var _ executor.LogReader = (*Backend)(nil)

// JobLog implements executor.LogReader: the end of the log of the
// attempt's pods on each node, read from the API server (which asks the
// node's kubelet). A node whose pods of the attempt are gone (a Job's
// retried pods are deleted), or whose kubelet does not answer, is
// unavailable with the reason. With several pods (or containers) on a
// node, each is headed by its name.
func (b *Backend) JobLog(ctx context.Context, id cluster.JobID, attempt int, nodes []string, maxBytes int) []executor.LogTail {
	b.mu.Lock()
	byNode := map[string][]*corev1.Pod{}
	if j := b.jobs[id]; j != nil {
		for _, p := range sortedPods(j.pods) {
			if p.Annotations[AnnotationAttempt] == strconv.Itoa(attempt) && p.Spec.NodeName != "" {
				byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			}
		}
	}
	// A job on MIG instances is planned on the instances' nodes; its pods
	// run on their Kubernetes node.
	host := map[string]string{}
	for kn, migs := range b.migNodes {
		for _, m := range migs {
			host[m] = kn
		}
	}
	b.mu.Unlock()

	out := make([]executor.LogTail, len(nodes))
	for i, n := range nodes {
		out[i].Node = n
		kn := n
		if h, ok := host[n]; ok {
			kn = h
		}
		pods := byNode[kn]
		if len(pods) == 0 {
			out[i].Unavailable = fmt.Sprintf("no pod of attempt %d is left on node %s (a pod is deleted when its attempt ends)", attempt, kn)
			continue
		}
		var text strings.Builder
		var errs []string
		for _, p := range pods {
			for _, c := range p.Spec.Containers {
				s, err := b.podLog(ctx, p, c.Name, maxBytes)
				if err != nil {
					errs = append(errs, fmt.Sprintf("pod %s/%s container %s: %v", p.Namespace, p.Name, c.Name, err))
					continue
				}
				if len(pods) > 1 || len(p.Spec.Containers) > 1 {
					fmt.Fprintf(&text, "==> pod %s/%s container %s <==\n", p.Namespace, p.Name, c.Name)
				}
				text.WriteString(s)
			}
		}
		s := text.String()
		if len(s) > maxBytes {
			s, out[i].Truncated = protocol.FromWholeLine(s[len(s)-maxBytes:]), true
		}
		out[i].Text = s
		if s == "" && len(errs) > 0 {
			out[i].Unavailable = "the API server gave no log: " + strings.Join(errs, "; ")
		}
	}
	return out
}

// podLog reads the end of a container's log: its last lines, as many as
// maxBytes holds at 40 bytes a line (LimitBytes would cut the newest off);
// JobLog keeps the end that fits.
func (b *Backend) podLog(ctx context.Context, p *corev1.Pod, container string, maxBytes int) (string, error) {
	lines := int64(min(max(maxBytes/40, 100), 50000))
	raw, err := b.cfg.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{
		Container: container, TailLines: &lines}).DoRaw(ctx)
	return string(raw), err
}
