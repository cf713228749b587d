package kubernetes

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Files are the manifests and the dashboard.
//
//go:embed *.yaml grafana/*.json
var Files embed.FS

// Manifests names the manifest files, in the order they apply.
var Manifests = []string{"namespace.yaml", "rbac.yaml", "configmap.yaml", "control-plane.yaml", "agent.yaml"}

// Optional names the manifests applied only where their feature is on:
// parking.yaml, the right to cordon nodes, with --park-idle-after.
var Optional = []string{"parking.yaml"}

// strict decodes typed objects and refuses unknown or duplicate fields.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// Objects decodes the documents of one manifest file into typed objects;
// an error names the file and the document.
func Objects(name string) ([]runtime.Object, error) {
	data, err := Files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return Decode(name, data)
}

// Decode decodes a multi-document YAML manifest strictly; name is used
// in errors.
func Decode(name string, data []byte) ([]runtime.Object, error) {
	var out []runtime.Object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		obj, _, err := strict.Decode(raw, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		out = append(out, obj)
	}
}

// stripComments drops the comment lines of a YAML document.
func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}
