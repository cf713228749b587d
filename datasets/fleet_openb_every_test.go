package datasets

import (
	"strings"
	"testing"
)

func TestOpenbFleetEveryNth(t *testing.T) {
	all, err := ReadFleet("openb:" + sharedDataset(t, "alibaba-openb", "openb_node_list_gpu_node.csv"))
	if err != nil {
		t.Fatal(err)
	}
	fifth, err := ReadFleet("openb:" + sharedDataset(t, "alibaba-openb", "openb_node_list_gpu_node.csv") + "?every=5")
	if err != nil {
		t.Fatal(err)
	}
	if len(fifth.Nodes) != 243 || fifth.GPUCount() != 1257 {
		t.Fatalf("every 5th GPU node: %d nodes, %d GPUs; want 243 and 1257", len(fifth.Nodes), fifth.GPUCount())
	}
	for i, n := range fifth.Nodes {
		if n.Name != all.Nodes[5*i].Name {
			t.Fatalf("node %d is %s, want %s", i, n.Name, all.Nodes[5*i].Name)
		}
	}
}

func TestOpenbFleetEveryRejectsBadOptions(t *testing.T) {
	for _, spec := range []string{"f.csv?every=0", "f.csv?every=x", "f.csv?each=5", "?every=5", "f.csv?every=-2"} {
		if _, _, err := parseEvery(spec); err == nil || !strings.Contains(err.Error(), "openb:"+spec) {
			t.Errorf("parseEvery(%q) = %v, want an error naming the spec", spec, err)
		}
	}
}

func FuzzOpenbFleetEvery(f *testing.F) {
	f.Add("nodes.csv?every=5")
	f.Add("nodes.csv")
	f.Add("a?b?every=1000001")
	f.Fuzz(func(t *testing.T, spec string) {
		path, n, err := parseEvery(spec)
		if err != nil {
			return
		}
		if n < 1 || n > maxEvery || path == "" && strings.Contains(spec, "?") {
			t.Fatalf("parseEvery(%q) = %q, %d: accepted a bad option", spec, path, n)
		}
	})
}
