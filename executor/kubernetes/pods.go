package kubernetes

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/prescient-sched/prescient/cluster"
)

// maxGangSize bounds prescient.io/gang-size.
const maxGangSize = 4096

// podJob says which job a pod belongs to.
type podJob struct {
	ID        cluster.JobID
	Namespace string
	Name      string // the pod's name, or the gang's
	Gang      bool
	Size      int // members the job needs: 1 for a single pod
}

// jobOfPod names the job of a pod: "k8s:NS:gang=GANG" for a member of a
// gang, "k8s:NS:pod=NAME:UID8" for a single pod. Neither a namespace nor a
// name nor a label value holds ':', so the IDs cannot collide. A single
// pod's ID carries the first 8 characters of its UID: a pod recreated
// under the same name is new work, while a gang keeps its ID across
// recreated members (that is how a gang whose bind failed is requeued).
func jobOfPod(p *corev1.Pod) (podJob, error) {
	gang, ok := p.Labels[LabelGang]
	if !ok || gang == "" {
		uid := string(p.UID)
		if len(uid) > 8 {
			uid = uid[:8]
		}
		return podJob{ID: cluster.JobID("k8s:" + p.Namespace + ":pod=" + p.Name + ":" + uid), Namespace: p.Namespace,
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
func specOf(pj podJob, members []*corev1.Pod) (cluster.JobSpec, error) {
	if len(members) == 0 {
		return cluster.JobSpec{}, fmt.Errorf("job %s: no pods", pj.ID)
	}
	first := members[0]
	where := fmt.Sprintf("pod %s/%s", first.Namespace, first.Name)
	spec := cluster.JobSpec{Name: pj.Name, Tenant: first.Namespace, Tier: cluster.DefaultTier,
		Labels: map[string]string{"k8s_namespace": pj.Namespace}}
	if pj.Gang {
		spec.Labels["k8s_gang"] = pj.Name
	} else {
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
		if m.Labels[LabelTenant] != first.Labels[LabelTenant] || m.Labels[LabelTier] != first.Labels[LabelTier] {
			return cluster.JobSpec{}, fmt.Errorf("%s: labels %s and %s differ from %s's", mw, LabelTenant, LabelTier, where)
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
