package rollout

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"sigs.k8s.io/yaml"
)

// The CRD of examples/controller/crd.yaml, read as plain data: its schema
// holds every field of the Go types (the API server drops fields a
// structural schema does not know, status included), its printer columns
// are the contract's, and its patterns and CEL rules, evaluated here with
// cel-go (the library the API server evaluates them with), accept the
// good policies and refuse the bad ones. make e2e applies it to a real
// API server (TestRolloutPolicyValidation).

type object = map[string]any

func crd(t *testing.T) object {
	t.Helper()
	b, err := os.ReadFile("../../examples/controller/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var o object
	if err := yaml.Unmarshal(b, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func dig(t *testing.T, o any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := o.(object)
			if !ok {
				t.Fatalf("%v: not an object at %q", path, k)
			}
			o = m[k]
		case int:
			o = o.([]any)[k]
		}
	}
	return o
}

func version(t *testing.T) object {
	return dig(t, crd(t), "spec", "versions", 0).(object)
}

// TestCRDSchemaHoldsTheGoTypes: every JSON field of Spec and Status is in
// the schema, and the schema has none the types lack.
func TestCRDSchemaHoldsTheGoTypes(t *testing.T) {
	v := version(t)
	if v["name"] != Version || dig(t, crd(t), "spec", "group") != Group || dig(t, crd(t), "spec", "names", "plural") != Resource || dig(t, crd(t), "spec", "names", "kind") != Kind {
		t.Fatalf("the CRD names another group, version or resource than the code")
	}
	if dig(t, v, "subresources", "status") == nil {
		t.Error("no status subresource: status writes would not be checked apart from the spec")
	}
	root := dig(t, v, "schema", "openAPIV3Schema", "properties").(object)
	var check func(path string, typ reflect.Type, schema object)
	check = func(path string, typ reflect.Type, schema object) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() != reflect.TypeFor[Spec]().PkgPath() {
			return
		}
		props, _ := schema["properties"].(object)
		if props == nil {
			props, _ = dig(t, schema, "items", "properties").(object)
		}
		var fields []string
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields = append(fields, name)
			sub, ok := props[name].(object)
			if !ok {
				t.Errorf("%s.%s: not in the schema (the API server would drop it)", path, name)
				continue
			}
			check(path+"."+name, f.Type, sub)
		}
		for name := range props {
			if !slices.Contains(fields, name) {
				t.Errorf("%s.%s: in the schema, not in the Go type", path, name)
			}
		}
	}
	check("spec", reflect.TypeFor[Spec](), root["spec"].(object))
	check("status", reflect.TypeFor[Status](), root["status"].(object))

	var cols []string
	for _, c := range dig(t, v, "additionalPrinterColumns").([]any) {
		if c.(object)["priority"] == nil {
			cols = append(cols, strings.ToUpper(c.(object)["name"].(string)))
		}
	}
	if want := []string{"SOURCE", "PHASE", "STEP", "UPDATED", "HEALTHY", "REVISION", "STABLE", "AGE"}; !slices.Equal(cols, want) {
		t.Errorf("columns %v, want %v", cols, want)
	}
}

// rule is a CEL rule of the schema, at the field it checks.
type rule struct {
	path, expr, message string
}

func rules(t *testing.T) map[string][]rule {
	out := map[string][]rule{}
	var walk func(path string, s object)
	walk = func(path string, s object) {
		if vs, ok := s["x-kubernetes-validations"].([]any); ok {
			for _, v := range vs {
				m := v.(object)
				out[path] = append(out[path], rule{path, m["rule"].(string), m["message"].(string)})
			}
		}
		if props, ok := s["properties"].(object); ok {
			for k, sub := range props {
				walk(strings.TrimPrefix(path+"."+k, "."), sub.(object))
			}
		}
	}
	walk("", dig(t, version(t), "schema", "openAPIV3Schema").(object))
	return out
}

func pattern(t *testing.T, path ...any) *regexp.Regexp {
	t.Helper()
	return regexp.MustCompile(dig(t, version(t), append([]any{"schema", "openAPIV3Schema"}, path...)...).(string))
}

func TestCRDValidation(t *testing.T) {
	rs := rules(t)
	eval := func(r rule, self, old any) bool {
		t.Helper()
		env, err := cel.NewEnv(cel.Variable("self", cel.DynType), cel.Variable("oldSelf", cel.DynType))
		if err != nil {
			t.Fatal(err)
		}
		ast, iss := env.Compile(r.expr)
		if iss.Err() != nil {
			t.Fatalf("%s: %q: %v", r.path, r.expr, iss.Err())
		}
		prg, err := env.Program(ast)
		if err != nil {
			t.Fatal(err)
		}
		out, _, err := prg.Eval(map[string]any{"self": self, "oldSelf": old})
		if err != nil {
			t.Fatalf("%s: %q on %v: %v", r.path, r.expr, self, err)
		}
		return out.Value() == true
	}
	for _, tc := range []struct {
		path string
		self any
		ok   bool
	}{
		{"spec.steps", []any{"10%", "50%", "100%"}, true},
		{"spec.steps", []any{"1", "100%"}, true},
		{"spec.steps", []any{"10%", "50%"}, false},
		{"spec.steps", []any{"3"}, false},
		{"spec.bakeTime", "10s", true},
		{"spec.bakeTime", "25h", false},
		{"spec.progressDeadline", "5m", true},
		{"spec.progressDeadline", "5s", false},
		{"spec.analysis.prometheus", object{"address": "http://p:9090", "query": "q", "max": 0.5}, true},
		{"spec.analysis.prometheus", object{"address": "http://p:9090", "query": "q"}, false},
		{"spec.analysis.prometheus", object{"address": "http://p:9090", "query": "q", "max": 0.5, "min": 1.0}, false},
		{"spec.analysis.prometheus.interval", "10s", true},
		{"spec.analysis.prometheus.interval", "500ms", false},
	} {
		ok := true
		for _, r := range rs[tc.path] {
			ok = ok && eval(r, tc.self, tc.self)
		}
		if len(rs[tc.path]) == 0 {
			t.Errorf("%s: no rule", tc.path)
		}
		if ok != tc.ok {
			t.Errorf("%s = %v: allowed %v, want %v", tc.path, tc.self, ok, tc.ok)
		}
	}
	src := rs["spec.source"]
	if len(src) != 1 || eval(src[0], object{"kind": "ConfigMap", "name": "a"}, object{"kind": "ConfigMap", "name": "b"}) {
		t.Error("spec.source can be changed")
	}
	step := pattern(t, "properties", "spec", "properties", "steps", "items", "pattern")
	for s, ok := range map[string]bool{"10%": true, "100%": true, "1%": true, "3": true, "101%": false, "0%": false, "0": false, "-1": false, "10 %": false, "1.5%": false, "05%": false} {
		if step.MatchString(s) != ok {
			t.Errorf("step %q allowed %v, want %v", s, !ok, ok)
		}
		if _, err := ParseStep(s); (err == nil) != ok && s != "0%" {
			t.Errorf("ParseStep(%q) = %v, but the CRD allows it: %v", s, err, ok)
		}
	}
	dur := pattern(t, "properties", "spec", "properties", "bakeTime", "pattern")
	for s, ok := range map[string]bool{"10s": true, "1m30s": true, "1.5h": true, "10": false, "ten seconds": false, "-1s": false} {
		if dur.MatchString(s) != ok {
			t.Errorf("duration %q allowed %v, want %v", s, !ok, ok)
		}
	}
	addr := pattern(t, "properties", "spec", "properties", "analysis", "properties", "prometheus", "properties", "address", "pattern")
	for s, ok := range map[string]bool{"http://prometheus.monitoring:9090": true, "https://p/prefix": true, "ftp://p": false, "http://user:pw@p": false, "p:9090": false} {
		if addr.MatchString(s) != ok {
			t.Errorf("address %q allowed %v, want %v", s, !ok, ok)
		}
	}
}

// The chart installs the same CRD (charts/hotreload/crds/, which helm
// install applies and make manifests renders into deploy/base).
func TestChartCRDIsTheExamples(t *testing.T) {
	a, err := os.ReadFile("../../examples/controller/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../charts/hotreload/crds/configrollouts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(a) != string(b) {
		t.Error("charts/hotreload/crds/configrollouts.yaml differs from examples/controller/crd.yaml: copy it")
	}
}
