package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// RevisionsAnnotation is the pod annotation through which the controller
// names the revision each ref runs: a JSON object from ref to revision,
// such as {"configmap/app-config":"81234"}.
const RevisionsAnnotation = "hotreload.dev/revisions"

// maxAnnotationsSize bounds the downwardAPI file: the API server caps a
// pod's annotations at 256 KiB.
const maxAnnotationsSize = 1 << 20

// ParseAnnotations reads the file that a downwardAPI volume writes for
// metadata.annotations: one line per annotation, sorted by key, each
// key="value" with the value quoted as Go quotes strings (the kubelet's
// fieldpath.FormatMap), the last line without a newline. It is strict: a
// line that is not exactly that, an invalid key or a key given twice makes
// the whole file an error. An empty file is no annotation.
func ParseAnnotations(b []byte) (map[string]string, error) {
	if len(b) > maxAnnotationsSize {
		return nil, fmt.Errorf("larger than %d bytes", maxAnnotationsSize)
	}
	out := map[string]string{}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return out, nil
	}
	for i, line := range strings.Split(s, "\n") {
		key, quoted, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: want key=\"value\"", i+1)
		}
		if err := checkAnnotationKey(key); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if !strings.HasPrefix(quoted, `"`) {
			return nil, fmt.Errorf("line %d: %s: the value is not a quoted string", i+1, key)
		}
		value, err := strconv.Unquote(quoted)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: the value is not a quoted string", i+1, key)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("line %d: %s given twice", i+1, key)
		}
		out[key] = value
	}
	return out, nil
}

var (
	// A qualified name's name part (at most 63 characters, checked
	// apart: a bounded repetition here compiles to a program some 60
	// times as large, built at every start of hotreload).
	annotationName = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// A DNS subdomain, the optional prefix.
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// checkAnnotationKey checks a key as the API server does: an optional DNS
// subdomain prefix and a slash, then a name of at most 63 characters.
func checkAnnotationKey(key string) error {
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	if hasPrefix && (len(prefix) > 253 || !dnsSubdomain.MatchString(prefix)) || len(name) > 63 || !annotationName.MatchString(name) {
		return fmt.Errorf("%.80q is not an annotation key", key)
	}
	return nil
}

// Revisions reads RevisionsAnnotation from annotations: ref -> revision.
// No annotation is an empty map. It is strict: the value must be a JSON
// object whose keys are refs (see ParseRef) and whose values are
// non-empty strings.
func Revisions(annotations map[string]string) (map[string]string, error) {
	s, ok := annotations[RevisionsAnnotation]
	if !ok {
		return map[string]string{}, nil
	}
	var revs map[string]string
	if err := json.Unmarshal([]byte(s), &revs); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("%s: not a JSON object: %w", RevisionsAnnotation, err)
		}
		return nil, fmt.Errorf("%s: want a JSON object of strings, such as {\"configmap/app-config\":\"81234\"}", RevisionsAnnotation)
	}
	if revs == nil {
		return nil, fmt.Errorf("%s: want a JSON object, not null", RevisionsAnnotation)
	}
	for ref, rev := range revs {
		if _, err := ParseRef(ref); err != nil {
			return nil, fmt.Errorf("%s: %w", RevisionsAnnotation, err)
		}
		if rev == "" {
			return nil, fmt.Errorf("%s: %s: the revision is empty", RevisionsAnnotation, ref)
		}
	}
	return revs, nil
}

// Ref names the ConfigMap or Secret a view follows, as the revisions
// annotation and the reserved key name it: "configmap/NAME" or
// "secret/NAME".
type Ref struct {
	Kind string // "configmap" or "secret"
	Name string
}

func (r Ref) String() string { return r.Kind + "/" + r.Name }

// ParseRef reads a ref: "configmap/NAME" or "secret/NAME", NAME a DNS
// subdomain (the API server's rule for both).
func ParseRef(s string) (Ref, error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind != "configmap" && kind != "secret" {
		return Ref{}, fmt.Errorf("ref %.80q: want configmap/NAME or secret/NAME", s)
	}
	if len(name) > 253 || !dnsSubdomain.MatchString(name) {
		return Ref{}, fmt.Errorf("ref %.80q: %.80q is not a ConfigMap or Secret name (lowercase letters, digits, '-' and '.')", s, name)
	}
	return Ref{Kind: kind, Name: name}, nil
}
