package kubernetes

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	kubebackend "github.com/prescient-sched/prescient/backend/kubernetes"
	"github.com/prescient-sched/prescient/collector"
)

func TestTheManifestsDecodeStrictly(t *testing.T) {
	kinds := map[string]int{}
	files, err := ManifestFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
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
		"Secret", "StatefulSet", "Service", "DaemonSet", "PersistentVolumeClaim", "ServiceMonitor", "PodMonitor"} {
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
	objs, err := Objects("base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	parking, err := Objects("components/parking/parking.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, parking...)
	want := map[string]map[string][]string{
		"prescient-scheduler": { // the backend
			"nodes": {"list", "watch"}, "pods": {"delete", "list", "patch", "watch"},
			"pods/binding": {"create"}, "pods/eviction": {"create"}, "pods/log": {"get"}, "events": {"create", "patch"},
			"batch/jobs": {"list", "watch"}, "persistentvolumeclaims": {"list", "patch", "watch"}, "persistentvolumes": {"list", "watch"},
			"storage.k8s.io/storageclasses": {"list", "watch"}, "namespaces": {"list", "watch"},
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
	objs, err := Objects("base/agent.yaml")
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
		if c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil || *c.SecurityContext.RunAsUser != 0 {
			t.Errorf("daemonset: runs as %v; the image's user is not root, and the agent's capabilities need root", c.SecurityContext)
		}
		if len(c.Env) == 0 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
			t.Errorf("daemonset: NODE_NAME does not come from spec.nodeName: %+v", c.Env)
		}
		return
	}
	t.Fatal("no DaemonSet")
}

// The default control plane: one replica, under its ServiceAccount and the
// leader election, its store and models on its own ReadWriteOnce volume,
// its tokens from a Secret, its telemetry in the InfluxDB of base/. The
// standby of overlays/ha is checked where kustomize renders it
// (test/kubernetes).
func TestTheControlPlaneRunsTheKubernetesBackendUnderItsServiceAccount(t *testing.T) {
	objs, err := Objects("base/control-plane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		d, ok := o.(*appsv1.StatefulSet)
		if !ok {
			continue
		}
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		args := strings.Join(c.Args, " ")
		if spec.ServiceAccountName != "prescient" || !strings.Contains(args, "--backend=kubernetes") || !strings.Contains(args, "--leader-elect") {
			t.Errorf("control plane: service account %q, args %q", spec.ServiceAccountName, args)
		}
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
			t.Errorf("control plane: env %v; want POD_NAME and POD_NAMESPACE for the leader label", env)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("control plane: %v replicas; want one by default", d.Spec.Replicas)
		}
		if len(d.Spec.VolumeClaimTemplates) != 1 || d.Spec.VolumeClaimTemplates[0].Name != "state" ||
			!slices.Equal(d.Spec.VolumeClaimTemplates[0].Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
			t.Errorf("control plane: claim templates %v; want one ReadWriteOnce state volume", d.Spec.VolumeClaimTemplates)
		}
		for _, flag := range []string{"--db", "--models"} {
			if m := mountOf(c, flagValue(c.Args, flag)); m == nil || m.Name != "state" {
				t.Errorf("control plane: %s=%s is not on the state volume (%v)", flag, flagValue(c.Args, flag), m)
			}
		}
		m := mountOf(c, flagValue(c.Args, "--tokens"))
		if m == nil {
			t.Fatalf("control plane: --tokens=%s is on no volume", flagValue(c.Args, "--tokens"))
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && (v.Secret == nil || v.Secret.SecretName != "prescient-tokens") {
				t.Errorf("control plane: the tokens come from %+v, want the Secret prescient-tokens", v.VolumeSource)
			}
		}
		if got := flagValue(c.Args, "--influx-url"); got != "http://influxdb.prescient.svc:8086" {
			t.Errorf("control plane: --influx-url=%q, want base/influxdb.yaml's Service", got)
		}
		return
	}
	t.Fatal("no StatefulSet")
}

// flagValue is the value of --name=VALUE among args, or "".
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// mountOf is the volume mount of c that holds path (the deepest), or nil.
func mountOf(c corev1.Container, p string) *corev1.VolumeMount {
	var best *corev1.VolumeMount
	for i, m := range c.VolumeMounts {
		if p != "" && (p == m.MountPath || strings.HasPrefix(p, strings.TrimSuffix(m.MountPath, "/")+"/")) &&
			(best == nil || len(m.MountPath) > len(best.MountPath)) {
			best = &c.VolumeMounts[i]
		}
	}
	return best
}

// Every Secret key a container reads, in any manifest, is one that
// base/secret.yaml defines, and every Secret volume names one of them.
func TestEverySecretReadIsShipped(t *testing.T) {
	objs, err := Objects("base/secret.yaml")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, o := range objs {
		s := o.(*corev1.Secret)
		for k := range s.StringData {
			keys[s.Name+"/"+k] = true
		}
		keys[s.Name] = true
	}
	files, err := ManifestFiles()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, name := range files {
		objs, err := Objects(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			var spec *corev1.PodSpec
			switch w := o.(type) {
			case *appsv1.StatefulSet:
				spec = &w.Spec.Template.Spec
			case *appsv1.DaemonSet:
				spec = &w.Spec.Template.Spec
			default:
				continue
			}
			for _, c := range spec.Containers {
				for _, e := range c.Env {
					if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil {
						reads++
						if !keys[r.SecretKeyRef.Name+"/"+r.SecretKeyRef.Key] {
							t.Errorf("%s: container %s reads %s/%s, which base/secret.yaml lacks", name, c.Name, r.SecretKeyRef.Name, r.SecretKeyRef.Key)
						}
					}
				}
			}
			for _, v := range spec.Volumes {
				if v.Secret != nil {
					reads++
					if !keys[v.Secret.SecretName] {
						t.Errorf("%s: volume %s is the Secret %s, which base/secret.yaml lacks", name, v.Name, v.Secret.SecretName)
					}
				}
			}
		}
	}
	if reads == 0 {
		t.Fatal("no manifest reads a Secret")
	}
}

// Every manifest file is a resource of exactly one kustomization, so
// kubectl apply -k ships each, and each kustomization's files exist.
func TestEveryManifestIsInOneKustomization(t *testing.T) {
	listed := map[string]int{}
	err := fs.WalkDir(Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Base(p) != "kustomization.yaml" {
			return err
		}
		data, err := Files.ReadFile(p)
		if err != nil {
			return err
		}
		var k struct {
			APIVersion string   `json:"apiVersion"`
			Kind       string   `json:"kind"`
			Resources  []string `json:"resources"`
			Components []string `json:"components"`
			Patches    []struct {
				Path string `json:"path"`
			} `json:"patches"`
		}
		if err := yaml.UnmarshalStrict(data, &k); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if k.Kind != "Kustomization" && k.Kind != "Component" {
			return fmt.Errorf("%s: kind %q", p, k.Kind)
		}
		refs := slices.Concat(k.Resources, k.Components)
		for _, pt := range k.Patches {
			refs = append(refs, pt.Path)
		}
		for _, r := range refs {
			full := path.Join(path.Dir(p), r)
			info, err := fs.Stat(Files, full)
			if err != nil {
				return fmt.Errorf("%s names %s: %w", p, r, err)
			}
			if !info.IsDir() {
				listed[full]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := ManifestFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if listed[f] != 1 {
			t.Errorf("%s: in %d kustomizations, want 1", f, listed[f])
		}
	}
}

// The Service reaches only the replica that leads.
func TestTheServiceSelectsTheLeader(t *testing.T) {
	objs, err := Objects("base/control-plane.yaml")
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
	files, err := ManifestFiles()
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
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
