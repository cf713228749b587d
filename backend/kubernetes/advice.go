package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/prescient-sched/prescient/service"
)

// Recommended implements service.RecommendationSink: the recommendation is
// written on the job's pods (annotation and Event) in the background.
func (b *Backend) Recommended(_ context.Context, r service.Recommendation) {
	select {
	case b.recs <- r:
	default:
		b.log.Warn("recommendation not written on the pods: too many waiting", "job", r.Job, "kind", r.Kind)
	}
}

// recommendationNote is the JSON of the prescient.io/recommendation
// annotation.
type recommendationNote struct {
	ID      int64          `json:"id"`
	Time    time.Time      `json:"time"`
	Kind    string         `json:"kind"`
	Reason  string         `json:"reason"`
	Details map[string]any `json:"details,omitempty"`
}

// annotate writes the recommendations on the pods until ctx ends.
func (b *Backend) annotate(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-b.recs:
			if err := b.writeRecommendation(ctx, r); err != nil {
				b.log.Warn("recommendation not written on the pods", "job", r.Job, "kind", r.Kind, "error", err)
			}
		}
	}
}

func (b *Backend) writeRecommendation(ctx context.Context, r service.Recommendation) error {
	if r.Job == "" {
		return nil
	}
	pods, err := b.members(r.Job, "recommend")
	if err != nil {
		return err
	}
	note, err := json.Marshal(recommendationNote{ID: r.ID, Time: r.Time.UTC(), Kind: r.Kind, Reason: r.Reason, Details: r.Details})
	if err != nil {
		return err
	}
	patch, err := annotationPatch(map[string]string{AnnotationRecommendation: string(note)})
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range pods {
		if _, err := b.cfg.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("annotate pod %s/%s: %w", p.Namespace, p.Name, err))
			continue
		}
		msg := r.Kind + ": " + r.Reason
		if nodes, ok := r.Details["placement"].([]any); ok && len(nodes) > 0 {
			msg += fmt.Sprintf(" (GPUs %v)", nodes)
		}
		b.podEvent(ctx, p, corev1.EventTypeNormal, "PrescientRecommendation", msg)
	}
	return errors.Join(errs...)
}

// podEvent records an Event on a pod; failures are logged.
func (b *Backend) podEvent(ctx context.Context, p *corev1.Pod, typ, reason, msg string) {
	recordEvent(ctx, b.cfg.Client, p, corev1.EventSource{Component: SchedulerName}, b.cfg.Clock(), typ, reason, msg, b.log)
}

// recordEvent records an Event about a pod; a failure is logged, never
// returned (Events are advice).
func recordEvent(ctx context.Context, client kubernetes.Interface, p *corev1.Pod, src corev1.EventSource, at time.Time,
	typ, reason, msg string, log *slog.Logger) {
	const maxMessage = 1024
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	now := metav1.NewTime(at)
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: p.Name + ".", Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Reason:         reason, Message: msg, Type: typ, Count: 1, FirstTimestamp: now, LastTimestamp: now, Source: src,
	}
	if _, err := client.CoreV1().Events(p.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		log.Warn("event not recorded", "pod", p.Namespace+"/"+p.Name, "reason", reason, "error", err)
	}
}

// annotationPatch is a JSON merge patch that sets annotations.
func annotationPatch(ann map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
}
