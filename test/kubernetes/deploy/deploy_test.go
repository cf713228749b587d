package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	manifests "github.com/prescient-sched/prescient/deploy/kubernetes"
	"github.com/prescient-sched/prescient/test/kubernetes/internal/apiserver"
)

// operatorVersion is the Prometheus Operator whose CRDs the monitoring
// component's ServiceMonitor and PodMonitor are checked against; its module
// (served by the Go module proxy) carries them.
const operatorVersion = "v0.85.0"

// Each shipped deployment, rendered by kustomize's own library from the
// embedded files, passes a server-side dry-run apply with strict field
// validation on a real API server: the default, the default with both
// components, and the HA overlay.
func TestTheDeploymentsApplyOnAServer(t *testing.T) {
	s := apiserver.Start(t)
	ctx := context.Background()
	installOperatorCRDs(t, ctx, s)
	dyn, err := dynamic.NewForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))

	for _, dir := range []string{".", "with-components", "overlays/ha"} {
		t.Run(dir, func(t *testing.T) {
			objs := render(t, dir)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.GetKind()]++
			}
			if dir == "with-components" && (kinds["ServiceMonitor"] != 1 || kinds["PodMonitor"] != 1) {
				t.Errorf("components: %v, want a ServiceMonitor and a PodMonitor", kinds)
			}
			for _, o := range objs {
				// Namespaced objects need their namespace to exist even
				// in a dry run, so the Namespace is applied for real.
				dry := o.GetKind() != "Namespace"
				if err := serverSideApply(ctx, dyn, mapper, o, dry); err != nil {
					t.Errorf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
			}
			if dir == "overlays/ha" {
				checkStandby(t, objs)
			}
		})
	}
}

// render runs kustomize on dir of the embedded deployment; the directory
// "with-components" is made here: the default plus every component.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	err := fs.WalkDir(manifests.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := manifests.Files.ReadFile(p)
		if err != nil {
			return err
		}
		return fsys.WriteFile(path.Join("/deploy", p), data)
	})
	if err != nil {
		t.Fatal(err)
	}
	comps, err := fs.ReadDir(manifests.Files, "components")
	if err != nil {
		t.Fatal(err)
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\ncomponents:\n"
	for _, c := range comps {
		k += "  - ../components/" + c.Name() + "\n"
	}
	if err := fsys.WriteFile("/deploy/with-components/kustomization.yaml", []byte(k)); err != nil {
		t.Fatal(err)
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, path.Join("/deploy", dir))
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	if len(out) == 0 {
		t.Fatalf("kustomize %s: no objects", dir)
	}
	return out
}

// serverSideApply applies o as the API server would for kubectl apply
// --server-side (--dry-run=server where dry), refusing unknown fields.
func serverSideApply(ctx context.Context, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper,
	o *unstructured.Unstructured, dry bool) error {
	gvk := o.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("map %s: %w", gvk, err)
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "prescient-deploy-test", Force: new(true), FieldValidation: "Strict"}
	if dry {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == "namespace" {
		r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	_, err = r.Patch(ctx, o.GetName(), types.ApplyPatchType, data, opts)
	return err
}

// checkStandby: the HA overlay runs two replicas whose --models is on one
// ReadWriteMany claim, each replica's store on its own volume.
func checkStandby(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	shared := map[string]bool{}
	var sts *appsv1.StatefulSet
	for _, o := range objs {
		switch {
		case o.GetKind() == "PersistentVolumeClaim":
			var c corev1.PersistentVolumeClaim
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &c); err != nil {
				t.Fatal(err)
			}
			shared[c.Name] = slices.Contains(c.Spec.AccessModes, corev1.ReadWriteMany)
		case o.GetKind() == "StatefulSet" && o.GetName() == "prescient":
			sts = &appsv1.StatefulSet{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, sts); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sts == nil {
		t.Fatal("no StatefulSet prescient")
	}
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 2 {
		t.Errorf("%v replicas, want 2", sts.Spec.Replicas)
	}
	c := sts.Spec.Template.Spec.Containers[0]
	var models string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--models="); ok {
			models = v
		}
	}
	var claim string
	for _, m := range c.VolumeMounts {
		if m.MountPath == models {
			for _, v := range sts.Spec.Template.Spec.Volumes {
				if v.Name == m.Name && v.PersistentVolumeClaim != nil {
					claim = v.PersistentVolumeClaim.ClaimName
				}
			}
		}
	}
	if !shared[claim] {
		t.Errorf("--models=%s is on claim %q, not on a ReadWriteMany one (%v)", models, claim, shared)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "state" {
		t.Errorf("claim templates %v; want a state volume per replica", sts.Spec.VolumeClaimTemplates)
	}
}

// installOperatorCRDs creates the Prometheus Operator's ServiceMonitor and
// PodMonitor CRDs, read from its Go module, and waits until both serve.
func installOperatorCRDs(t *testing.T, ctx context.Context, s *apiserver.Server) {
	t.Helper()
	mod := "github.com/prometheus-operator/prometheus-operator@" + operatorVersion
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); err != nil || jerr != nil || dl.Error != "" || dl.Dir == "" {
		t.Fatalf("the Prometheus Operator's CRDs come from its module %s (the Go module proxy must be reachable): %v %s %s", mod, err, dl.Error, out)
	}
	client, err := apiextensions.NewForConfig(s.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"servicemonitors", "podmonitors"} {
		file := filepath.Join(dl.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+name+".yaml")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("read the CRD: %v", err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create CRD %s: %v", crd.Name, err)
		}
		err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established: %v", crd.Name, err)
		}
	}
}
