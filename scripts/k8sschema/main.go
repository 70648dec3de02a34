// Command k8sschema writes the strict, standalone JSON schemas that the
// deploy/ manifests are validated against (deploy/manifests_test.go, with
// kubeconform) from the Kubernetes OpenAPI definitions and CRD files, so
// the test needs no network. Run it again when the schemas should follow
// a newer Kubernetes or CRD release (docs/deploy.md, "Validating the
// manifests"):
//
//	go run ./scripts/k8sschema -swagger $K8S/api/openapi-spec/swagger.json \
//	    -crd $GIE/config/crd/bases/inference.networking.k8s.io_inferencepools.yaml \
//	    -crd $GWAPI/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml \
//	    -out deploy/testdata/schemas
//
// The layout is kubeconform's: KIND-GROUP-VERSION.json (lower case, the
// group's first label; core kinds KIND-VERSION.json). Every object schema
// with properties is closed (additionalProperties false: unknown fields are
// errors, kubeconform's -strict), int-or-string fields accept both, and
// descriptions are dropped to keep the files small.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// kinds are the built-in kinds the manifests use: definition name -> file.
var kinds = map[string]string{
	"io.k8s.api.apps.v1.Deployment":     "deployment-apps-v1",
	"io.k8s.api.core.v1.Service":        "service-v1",
	"io.k8s.api.core.v1.ConfigMap":      "configmap-v1",
	"io.k8s.api.core.v1.Secret":         "secret-v1",
	"io.k8s.api.core.v1.ServiceAccount": "serviceaccount-v1",
}

type crdList []string

func (c *crdList) String() string     { return strings.Join(*c, ",") }
func (c *crdList) Set(s string) error { *c = append(*c, s); return nil }

func main() {
	swagger := flag.String("swagger", "", "Kubernetes api/openapi-spec/swagger.json")
	out := flag.String("out", "deploy/testdata/schemas", "output folder")
	var crds crdList
	flag.Var(&crds, "crd", "a CustomResourceDefinition YAML file (repeatable)")
	flag.Parse()
	if err := run(*swagger, crds, *out); err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
}

func run(swagger string, crds []string, out string) error {
	if swagger == "" {
		return errors.New("-swagger is required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	raw, err := os.ReadFile(swagger)
	if err != nil {
		return err
	}
	var spec struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return err
	}
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, def := range names {
		d, ok := spec.Definitions[def]
		if !ok {
			return fmt.Errorf("definition %s not in %s", def, swagger)
		}
		r := resolver{defs: spec.Definitions, stack: map[string]bool{def: true}}
		if err := write(filepath.Join(out, kinds[def]+".json"), r.expand(d)); err != nil {
			return err
		}
	}
	for _, f := range crds {
		if err := crd(f, out); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// resolver inlines #/definitions references.
type resolver struct {
	defs  map[string]map[string]any
	stack map[string]bool // definitions being expanded (cycle guard)
}

func (r *resolver) expand(node any) any {
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			if special := wellKnown(name); special != nil {
				return special
			}
			if r.stack[name] {
				return map[string]any{} // a cycle: accept anything below
			}
			r.stack[name] = true
			defer delete(r.stack, name)
			return r.expand(r.defs[name])
		}
		return closeObject(n, r.expand)
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = r.expand(v)
		}
		return out
	}
	return node
}

// wellKnown are the definitions whose JSON form is not what swagger says.
func wellKnown(name string) map[string]any {
	switch {
	case strings.HasSuffix(name, ".IntOrString"):
		return intOrString()
	case strings.HasSuffix(name, ".Quantity"):
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	}
	return nil
}

func intOrString() map[string]any {
	return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
}

// closeObject copies a schema node without descriptions, expanding its
// children, and closes objects that list their properties.
func closeObject(n map[string]any, expand func(any) any) any {
	if n["format"] == "int-or-string" || n["x-kubernetes-int-or-string"] == true {
		return intOrString()
	}
	out := map[string]any{}
	for k, v := range n {
		switch k {
		case "description", "x-kubernetes-group-version-kind", "x-kubernetes-validations":
			continue
		case "properties":
			props := map[string]any{}
			for pk, pv := range v.(map[string]any) {
				props[pk] = expand(pv)
			}
			out[k] = props
		default:
			out[k] = expand(v)
		}
	}
	if _, has := out["properties"]; has {
		if _, set := out["additionalProperties"]; !set {
			out["additionalProperties"] = false
		}
	}
	return out
}

// crd writes the schema of every served version of a CRD.
func crd(path, out string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var c struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return err
	}
	group := strings.Split(c.Spec.Group, ".")[0]
	for _, v := range c.Spec.Versions {
		if !v.Served || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		var expand func(any) any
		expand = func(node any) any {
			switch n := node.(type) {
			case map[string]any:
				return closeObject(n, expand)
			case []any:
				o := make([]any, len(n))
				for i, e := range n {
					o[i] = expand(e)
				}
				return o
			}
			return node
		}
		name := fmt.Sprintf("%s-%s-%s.json", strings.ToLower(c.Spec.Names.Kind), group, v.Name)
		if err := write(filepath.Join(out, name), expand(v.Schema.OpenAPIV3Schema)); err != nil {
			return err
		}
	}
	return nil
}

func write(path string, schema any) error {
	b, err := json.MarshalIndent(schema, "", " ")
	if err != nil {
		return err
	}
	fmt.Println("wrote", path)
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
