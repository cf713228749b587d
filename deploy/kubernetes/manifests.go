package kubernetes

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Files are the manifests, their kustomizations and the dashboards, as in
// the repository: kustomization.yaml (the default, base/), base/,
// components/ (parking, monitoring), overlays/ (ha) and grafana/.
//
//go:embed kustomization.yaml base components overlays grafana/*.json
var Files embed.FS

// ManifestFiles names every manifest file in Files (the YAML files that are
// not kustomizations), in lexical order.
func ManifestFiles() ([]string, error) {
	var out []string
	err := fs.WalkDir(Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && path.Ext(p) == ".yaml" && path.Base(p) != "kustomization.yaml" {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

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
// in errors. Kinds that client-go does not know (a CRD's, such as the
// Prometheus Operator's ServiceMonitor) come back unstructured, their
// fields left to the API server's validation against the CRD's schema.
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
		if runtime.IsNotRegisteredError(err) {
			obj, err = decodeUnstructured(raw)
		}
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

// decodeUnstructured decodes one document of a kind client-go does not
// know, refusing duplicate fields as the strict decoder does.
func decodeUnstructured(raw []byte) (runtime.Object, error) {
	js, err := yaml.YAMLToJSONStrict(raw)
	if err != nil {
		return nil, err
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(js); err != nil {
		return nil, err
	}
	return &u, nil
}
