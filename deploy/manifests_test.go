// Package deploy holds the deployment pieces (docs/deploy.md): Kubernetes
// manifests and a systemd unit. Its test validates every manifest with
// kubeconform against the schemas in testdata/schemas (written by
// scripts/k8sschema from Kubernetes 1.32's OpenAPI definitions, the
// Gateway API Inference Extension v1.6.0 InferencePool CRD and Gateway API
// v1.6.3's HTTPRoute CRD), so it needs no network.
package deploy

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/yannh/kubeconform/pkg/validator"
)

func newValidator(t *testing.T) validator.Validator {
	t.Helper()
	schemas, err := filepath.Abs(filepath.Join("testdata", "schemas"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := validator.New([]string{filepath.Join(schemas, "{{ .ResourceKind }}{{ .KindSuffix }}.json")},
		validator.Opts{Strict: true, KubernetesVersion: "1.32.0"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// validate runs kubeconform on one YAML stream and returns the results of
// its non-empty documents.
func validate(t *testing.T, v validator.Validator, name string, r io.Reader) []validator.Result {
	t.Helper()
	var out []validator.Result
	for _, res := range v.Validate(name, io.NopCloser(r)) {
		if res.Status != validator.Empty {
			out = append(out, res)
		}
	}
	return out
}

func describe(res validator.Result) string {
	sig, _ := res.Resource.Signature()
	s := res.Resource.Path
	if sig != nil {
		s += " " + sig.Kind + "/" + sig.Name
	}
	if res.Err != nil {
		s += ": " + res.Err.Error()
	}
	for _, e := range res.ValidationErrors {
		s += "\n    " + e.Path + ": " + e.Msg
	}
	return s
}

// TestManifestsValid: every document under kubernetes/ is a known kind and
// valid in strict mode (no unknown fields).
func TestManifestsValid(t *testing.T) {
	v := newValidator(t)
	files, err := filepath.Glob(filepath.Join("kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	kinds := map[string]int{}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			results := validate(t, v, f, fh)
			if len(results) == 0 {
				t.Fatal("no resources")
			}
			for _, res := range results {
				if res.Status != validator.Valid {
					t.Errorf("%v: %s", res.Status, describe(res))
					continue
				}
				sig, _ := res.Resource.Signature()
				kinds[sig.Kind]++
			}
		})
	}
	for _, k := range []string{"Deployment", "Service", "Secret", "InferencePool", "HTTPRoute"} {
		if kinds[k] == 0 {
			t.Errorf("no valid %s among the manifests (%v)", k, kinds)
		}
	}
}

// TestValidatorRejects: the same validator refuses what a cluster would:
// an unknown field, a wrong type, a missing required field, an unknown kind.
func TestValidatorRejects(t *testing.T) {
	v := newValidator(t)
	cases := map[string]string{
		"unknown field": `apiVersion: v1
kind: Service
metadata: {name: x}
spec:
  selector: {app: x}
  portz: [{port: 80}]
`,
		"wrong type": `apiVersion: apps/v1
kind: Deployment
metadata: {name: x}
spec:
  replicas: "two"
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec: {containers: [{name: x, image: x}]}
`,
		"missing required": `apiVersion: inference.networking.k8s.io/v1
kind: InferencePool
metadata: {name: x}
spec:
  selector: {matchLabels: {app: x}}
  endpointPickerRef: {name: epp, port: {number: 9002}}
`,
		"unknown kind": `apiVersion: example.com/v1
kind: Widget
metadata: {name: x}
`,
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			results := validate(t, v, name, strings.NewReader(doc))
			if len(results) != 1 || results[0].Status == validator.Valid {
				t.Fatalf("accepted: %v", results)
			}
		})
	}
}
