package kubernetes

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/prescient-sched/prescient/cluster"
)

// maxGangSize bounds prescient.io/gang-size.
const maxGangSize = 4096

// podJob says which job a pod belongs to.
type podJob struct {
	ID        cluster.JobID
	Namespace string
	Name      string // the pod's name, or the gang's, or the owning Job's
	Gang      bool
	Size      int // members the job needs: 1 for a single pod
	// Owner is the batch Job whose unit of work the pod is, when the job
	// is one: its controller recreates the pod when it fails or is evicted,
	// and the new pod is the same job's next attempt.
	Owner *batchv1.Job
}

// AnnotationCompletionIndex is the index the Job controller gives each pod
// of an Indexed Job.
const AnnotationCompletionIndex = batchv1.JobCompletionIndexAnnotation

// errOwnerNotSeen says a pod's owning Job is not in the informer's cache
// yet: the pod waits for it.
var errOwnerNotSeen = errors.New("its owning Job is not seen yet")

// jobOfPod names the job of a pod: "k8s:NS:gang=GANG" for a member of a
// gang; for a pod of a batch Job (its controller), "k8s:NS:job=NAME:UID8"
// when the Job is one unit of work (completions 1, or unset with
// parallelism at most 1) and "k8s:NS:job=NAME:UID8:index=I" for the pod of
// index I of an Indexed Job; else "k8s:NS:pod=NAME:UID8". Neither a
// namespace nor a name nor a label value holds ':', so the IDs cannot
// collide. A single pod's ID carries the first 8 characters of its UID: a
// pod recreated under the same name is new work, while a gang, or a Job's
// unit of work, keeps its ID across recreated pods (that is how a gang
// whose bind failed, or a Job's evicted pod, is requeued). jobs looks up
// a Job by namespace and name (nil when not seen); a pod whose owning Job
// it does not know gets errOwnerNotSeen.
func jobOfPod(p *corev1.Pod, jobs func(ns, name string) *batchv1.Job) (podJob, error) {
	gang, ok := p.Labels[LabelGang]
	if !ok || gang == "" {
		// A pod bound as a single pod (by a version that did not read
		// owning Jobs) stays one: its annotation names its job.
		single := strings.HasPrefix(p.Annotations[AnnotationJob], "k8s:"+p.Namespace+":pod=")
		if ref := metav1.GetControllerOf(p); !single && ref != nil && ref.Kind == "Job" && ref.APIVersion == batchv1.SchemeGroupVersion.String() {
			j := jobs(p.Namespace, ref.Name)
			if j == nil || j.UID != ref.UID {
				return podJob{}, fmt.Errorf("pod %s/%s: Job %s: %w", p.Namespace, p.Name, ref.Name, errOwnerNotSeen)
			}
			base := "k8s:" + p.Namespace + ":job=" + j.Name + ":" + uid8(j.UID)
			if i, ok := p.Annotations[AnnotationCompletionIndex]; ok {
				if n, err := strconv.Atoi(i); err != nil || n < 0 {
					return podJob{}, fmt.Errorf("pod %s/%s: annotation %s=%q: want a completion index", p.Namespace, p.Name,
						AnnotationCompletionIndex, i)
				}
				return podJob{ID: cluster.JobID(base + ":index=" + i), Namespace: p.Namespace, Name: j.Name + "-" + i,
					Size: 1, Owner: j}, nil
			}
			if oneUnit(j) {
				return podJob{ID: cluster.JobID(base), Namespace: p.Namespace, Name: j.Name, Size: 1, Owner: j}, nil
			}
		}
		return podJob{ID: cluster.JobID("k8s:" + p.Namespace + ":pod=" + p.Name + ":" + uid8(p.UID)), Namespace: p.Namespace,
			Name: p.Name, Size: 1}, nil
	}
	s, ok := p.Labels[LabelGangSize]
	if !ok {
		return podJob{}, fmt.Errorf("pod %s/%s: label %s=%s without %s", p.Namespace, p.Name, LabelGang, gang, LabelGangSize)
	}
	size, err := strconv.Atoi(s)
	if err != nil || size < 1 || size > maxGangSize {
		return podJob{}, fmt.Errorf("pod %s/%s: label %s=%q: want a member count from 1 to %d", p.Namespace, p.Name, LabelGangSize, s, maxGangSize)
	}
	return podJob{ID: cluster.JobID("k8s:" + p.Namespace + ":gang=" + gang), Namespace: p.Namespace, Name: gang, Gang: true, Size: size}, nil
}

// specOf is the job spec of a pod or of a gang's members (sorted by name).
// Members must agree on the gang size, tenant, tier and GPUs per member.
func specOf(pj podJob, members []*corev1.Pod, classTiers map[string]cluster.Tier) (cluster.JobSpec, error) {
	if len(members) == 0 {
		return cluster.JobSpec{}, fmt.Errorf("job %s: no pods", pj.ID)
	}
	first := members[0]
	where := fmt.Sprintf("pod %s/%s", first.Namespace, first.Name)
	spec := cluster.JobSpec{Name: pj.Name, Tenant: first.Namespace, Tier: cluster.DefaultTier,
		Labels: map[string]string{"k8s_namespace": pj.Namespace}}
	switch {
	case pj.Gang:
		spec.Labels["k8s_gang"] = pj.Name
	case pj.Owner != nil:
		spec.Labels["k8s_job"] = pj.Owner.Name
		spec.Deadline = jobDeadline(pj.Owner)
	default:
		spec.Labels["k8s_pod"] = pj.Name
	}
	if t, ok := first.Labels[LabelTenant]; ok && t != "" {
		spec.Tenant = t
	}
	if s, ok := first.Labels[LabelTier]; ok {
		t, err := cluster.ParseTier(s)
		if err != nil {
			return cluster.JobSpec{}, fmt.Errorf("%s: label %s: %w", where, LabelTier, err)
		}
		spec.Tier = t
	} else if t, ok := tierOfClass(first.Spec.PriorityClassName, classTiers); ok {
		spec.Tier = t
	}
	if s, ok := first.Annotations[AnnotationCheckpointable]; ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return cluster.JobSpec{}, fmt.Errorf("%s: annotation %s=%q: want true or false", where, AnnotationCheckpointable, s)
		}
		spec.Checkpointable = b
	}
	profile, perPod, err := podDevices(first)
	if err != nil {
		return cluster.JobSpec{}, err
	}
	if perPod > maxGPUsPerNode {
		return cluster.JobSpec{}, fmt.Errorf("%s: %d GPUs: more than %d", where, perPod, maxGPUsPerNode)
	}
	for _, m := range members {
		mw := fmt.Sprintf("pod %s/%s", m.Namespace, m.Name)
		prof, g, err := podDevices(m)
		if err != nil {
			return cluster.JobSpec{}, err
		}
		if g != perPod || prof != profile {
			return cluster.JobSpec{}, fmt.Errorf("%s: %s, but %s of the same gang asks %s", mw, devices(prof, g), where, devices(profile, perPod))
		}
		if m.Labels[LabelTenant] != first.Labels[LabelTenant] || m.Labels[LabelTier] != first.Labels[LabelTier] ||
			m.Spec.PriorityClassName != first.Spec.PriorityClassName {
			return cluster.JobSpec{}, fmt.Errorf("%s: labels %s and %s or priorityClassName differ from %s's", mw, LabelTenant, LabelTier, where)
		}
		if pj.Gang && m.Labels[LabelGangSize] != first.Labels[LabelGangSize] {
			return cluster.JobSpec{}, fmt.Errorf("%s: label %s differs from %s's", mw, LabelGangSize, where)
		}
		cpu, mem := podRequests(m)
		spec.CPUMilli += cpu
		spec.MemoryBytes += mem
	}
	spec.GPUs = int(perPod) * pj.Size
	if spec.GPUs > 0 {
		spec.GPUMilli = cluster.MilliGPU
	}
	if profile != "" {
		spec.GPUModels = []string{cluster.MIGInstanceModel(profile)}
	}
	if pj.Gang && pj.Size > 1 {
		spec.GangSize = pj.Size
	}
	return spec, nil
}

// specMembers are the pods a job's spec is read from, sorted by name: its
// unfinished pods when there are enough of them (a Job's failed pods of
// earlier attempts are history), else all.
func specMembers(pods map[string]*corev1.Pod, size int) []*corev1.Pod {
	all := sortedPods(pods)
	live := make([]*corev1.Pod, 0, len(all))
	for _, p := range all {
		if !finished(p) {
			live = append(live, p)
		}
	}
	if len(live) >= size {
		return live
	}
	return all
}

// sortedPods returns the pods sorted by name.
func sortedPods(m map[string]*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(m))
	for _, p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// podDevices is what a pod asks of GPUs: whole GPUs (profile "") or
// instances of one MIG profile.
func podDevices(p *corev1.Pod) (profile string, count int64, err error) {
	profile, count, err = podMIG(p)
	if err != nil || profile != "" {
		return profile, count, err
	}
	return "", podGPUs(p), nil
}

// devices says what podDevices found, for errors.
func devices(profile string, n int64) string {
	if profile == "" {
		return fmt.Sprintf("%d GPUs", n)
	}
	return fmt.Sprintf("%d MIG instances %s", n, profile)
}

// uid8 is the first 8 characters of a UID.
func uid8(u types.UID) string {
	s := string(u)
	if len(s) > 8 {
		s = s[:8]
	}
	return s
}

// oneUnit reports whether a non-indexed Job is one unit of work: one
// successful pod completes it and no two of its pods run at once.
func oneUnit(j *batchv1.Job) bool {
	if j.Spec.Completions != nil {
		return *j.Spec.Completions == 1
	}
	return j.Spec.Parallelism == nil || *j.Spec.Parallelism <= 1
}

// jobDeadline is when a Job must be done by its activeDeadlineSeconds,
// counted from its creation (its controller counts from its start, a
// moment later; the creation does not change, so the spec a restart
// submits again is the same); zero for none.
func jobDeadline(j *batchv1.Job) time.Time {
	if j == nil || j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds <= 0 {
		return time.Time{}
	}
	return j.CreationTimestamp.Add(time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second).UTC()
}

// jobFailed reports whether a Job's controller gave up on it.
func jobFailed(j *batchv1.Job) (string, bool) {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message, true
		}
	}
	return "", false
}

// finished reports whether a pod ran to its end.
func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// tierOfClass is the tier of a PriorityClass: as classTiers says, else
// production for the system classes; ok is false for a class neither
// names (the job keeps the default tier).
func tierOfClass(class string, classTiers map[string]cluster.Tier) (cluster.Tier, bool) {
	if class == "" {
		return 0, false
	}
	if t, ok := classTiers[class]; ok {
		return t, true
	}
	if class == "system-cluster-critical" || class == "system-node-critical" {
		return cluster.TierProduction, true
	}
	return 0, false
}
