package kubernetes

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/collector"
)

func TestTheManifestsDecodeStrictly(t *testing.T) {
	kinds := map[string]int{}
	for _, name := range slices.Concat(Manifests, Optional) {
		objs, err := Objects(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(objs) == 0 {
			t.Errorf("%s: no objects", name)
		}
		for _, o := range objs {
			kinds[o.GetObjectKind().GroupVersionKind().Kind]++
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"ConfigMap", "StatefulSet", "Service", "DaemonSet", "PersistentVolumeClaim"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the manifests (%v)", k, kinds)
		}
	}
	if _, err := Decode("bad.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndatta: {}\n")); err == nil ||
		!strings.Contains(err.Error(), "bad.yaml") {
		t.Errorf("an unknown field: %v, want an error naming the file", err)
	}
}

// Each role's rights are the least its user needs: no wildcard, no
// secrets, no writes to nodes but parking's cordon, in a file of its own.
func TestTheRolesGrantOnlyWhatTheirUsersUse(t *testing.T) {
	objs, err := Objects("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parking, err := Objects("parking.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, parking...)
	want := map[string]map[string][]string{
		"prescient-scheduler": { // the backend
			"nodes": {"list", "watch"}, "pods": {"delete", "list", "patch", "watch"},
			"pods/binding": {"create"}, "pods/eviction": {"create"}, "pods/log": {"get"}, "events": {"create", "patch"},
			"batch/jobs": {"list", "watch"},
		},
		"prescient-leader-election": {"coordination.k8s.io/leases": {"create", "get", "update"}},
		"prescient-parking":         {"nodes": {"get", "patch"}},                                // the backend's Cordon and Uncordon
		"prescient-agent":           {"pods": {"list", "patch", "watch"}, "events": {"create"}}, // the node agent
	}
	got := map[string]map[string][]string{}
	for _, o := range objs {
		var name string
		var rules []rbacv1.PolicyRule
		switch r := o.(type) {
		case *rbacv1.ClusterRole:
			name, rules = r.Name, r.Rules
		case *rbacv1.Role:
			name, rules = r.Name, r.Rules
			if r.Namespace != "prescient" {
				t.Errorf("role %s in namespace %q, want prescient", r.Name, r.Namespace)
			}
		default:
			continue
		}
		got[name] = map[string][]string{}
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					key := res
					if g != "" {
						key = g + "/" + res
					}
					for _, v := range rule.Verbs {
						if v == "*" || res == "*" || g == "*" {
							t.Errorf("role %s: wildcard in %+v", name, rule)
						}
						got[name][key] = append(got[name][key], v)
					}
				}
			}
		}
		for k := range got[name] {
			slices.Sort(got[name][k])
		}
	}
	for role, grants := range want {
		if got[role] == nil {
			t.Errorf("no role %s", role)
		}
		for k, v := range grants {
			if !slices.Equal(got[role][k], v) {
				t.Errorf("role %s, %s: verbs %v, want %v", role, k, got[role][k], v)
			}
		}
		for k := range got[role] {
			if _, ok := grants[k]; !ok {
				t.Errorf("role %s grants %s: its user does not use it", role, k)
			}
		}
	}
	for role := range got {
		if _, ok := want[role]; !ok {
			t.Errorf("role %s: not one this test knows", role)
		}
	}
}

// The node agent runs on GPU nodes under its own ServiceAccount, sees the
// host's processes and knows its node.
func TestTheNodeAgentRunsOnEveryGPUNode(t *testing.T) {
	objs, err := Objects("agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		d, ok := o.(*appsv1.DaemonSet)
		if !ok {
			continue
		}
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		args := strings.Join(c.Args, " ")
		if spec.ServiceAccountName != "prescient-agent" || !spec.HostPID || !strings.Contains(args, "agent --kubernetes") ||
			!strings.Contains(args, "--node=$(NODE_NAME)") || !strings.Contains(args, "--collect") {
			t.Errorf("daemonset: service account %q, hostPID %v, args %q", spec.ServiceAccountName, spec.HostPID, args)
		}
		if len(c.Env) == 0 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("daemonset: NODE_NAME does not come from spec.nodeName: %+v", c.Env)
		}
		return
	}
	t.Fatal("no DaemonSet")
}

func TestTheControlPlaneRunsTheKubernetesBackendUnderItsServiceAccount(t *testing.T) {
	objs, err := Objects("control-plane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shared := map[string]bool{}
	for _, o := range objs {
		if c, ok := o.(*corev1.PersistentVolumeClaim); ok && slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany) {
			shared[c.Name] = true
		}
	}
	for _, o := range objs {
		d, ok := o.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		spec := d.Spec.Template.Spec
		args := strings.Join(spec.Containers[0].Args, " ")
		if spec.ServiceAccountName != "prescient" || !strings.Contains(args, "--backend=kubernetes") || !strings.Contains(args, "--leader-elect") {
			t.Errorf("control plane: service account %q, args %q", spec.ServiceAccountName, args)
		}
		env := map[string]string{}
		for _, e := range spec.Containers[0].Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
			t.Errorf("control plane: env %v; want POD_NAME and POD_NAMESPACE for the leader label", env)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("control plane: %v replicas; want a standby", d.Spec.Replicas)
		}
		// Each replica's store on its own volume; the models on one that
		// every replica reads.
		if len(d.Spec.VolumeClaimTemplates) != 1 || d.Spec.VolumeClaimTemplates[0].Name != "state" {
			t.Errorf("control plane: claim templates %v; want a state volume per replica", d.Spec.VolumeClaimTemplates)
		}
		var models string
		for _, m := range spec.Containers[0].VolumeMounts {
			if strings.Contains(args, "--models="+m.MountPath) {
				models = m.Name
			}
		}
		found := false
		for _, v := range spec.Volumes {
			if v.Name == models && v.PersistentVolumeClaim != nil && shared[v.PersistentVolumeClaim.ClaimName] {
				found = true
			}
		}
		if !found {
			t.Errorf("control plane: --models is not on a ReadWriteMany volume (mount %q)", models)
		}
		return
	}
	t.Fatal("no StatefulSet")
}

// The Service reaches only the replica that leads.
func TestTheServiceSelectsTheLeader(t *testing.T) {
	objs, err := Objects("control-plane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if s, ok := o.(*corev1.Service); ok && s.Name == "prescient" {
			if s.Spec.Selector[kubebackend.LabelLeader] != "true" {
				t.Errorf("service %s selects %v; want %s=true", s.Name, s.Spec.Selector, kubebackend.LabelLeader)
			}
			return
		}
	}
	t.Fatal("no Service prescient")
}

var (
	measurementRe = regexp.MustCompile(`r\._measurement == "([^"]*)"`)
	fieldRe       = regexp.MustCompile(`r\._field == "([^"]*)"`)
)

// The dashboard is valid JSON and its queries name only measurements and
// fields the collector writes.
func TestTheDashboardQueriesWhatTheCollectorWrites(t *testing.T) {
	data, err := Files.ReadFile("grafana/prescient.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Query string `json:"query"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana/prescient.json: %v", err)
	}
	if dash.Title == "" || len(dash.Panels) == 0 {
		t.Fatal("grafana/prescient.json: no title or no panels")
	}
	written := map[string]map[string]bool{collector.MeasurementGPU: {}, collector.MeasurementProcess: {"mem_used_bytes": true}}
	for _, f := range collector.Fields {
		written[collector.MeasurementGPU][f.Name] = true
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no query", p.Title)
		}
		for _, q := range p.Targets {
			if err := checkQuery(q.Query, written); err != nil {
				t.Errorf("panel %q: %v", p.Title, err)
			}
		}
	}
	bad := `from(bucket: "b") |> filter(fn: (r) => r._measurement == "gpu" and r._field == "util_pct")`
	if checkQuery(bad, written) == nil {
		t.Error("a query of a field the collector does not write passed")
	}
}

// checkQuery says what in a Flux query names a measurement or field the
// collector does not write.
func checkQuery(q string, written map[string]map[string]bool) error {
	ms := measurementRe.FindAllStringSubmatch(q, -1)
	fs := fieldRe.FindAllStringSubmatch(q, -1)
	if len(ms) != 1 || len(fs) == 0 {
		return fmt.Errorf("query names %d measurements and %d fields, want one and some: %s", len(ms), len(fs), q)
	}
	fields, ok := written[ms[0][1]]
	if !ok {
		return fmt.Errorf("measurement %q: the collector writes %v", ms[0][1], []string{collector.MeasurementGPU, collector.MeasurementProcess})
	}
	for _, f := range fs {
		if !fields[f[1]] {
			return fmt.Errorf("measurement %s has no field %q", ms[0][1], f[1])
		}
	}
	return nil
}

// FuzzDecode: any bytes decode or fail with an error, never a panic.
func FuzzDecode(f *testing.F) {
	for _, name := range slices.Concat(Manifests, Optional) {
		data, err := Files.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("---\n---\nkind: Pod\n"))
	f.Add([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: [1, 2]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Decode("fuzz.yaml", data)
	})
}
