package injector

import "strings"

// Op is one operation of a JSON patch (RFC 6902).
//
// The patch is built by hand rather than by diffing the pod before and
// after with a library: a diff marshals the whole pod through this
// binary's k8s.io/api types, and a field that an API server newer than
// them sends would be missing after the round trip, so the diff would
// remove it. Each operation here touches only what the injector adds.
type Op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// escapePointer escapes a key for a JSON pointer (RFC 6901): "~" as "~0",
// "/" as "~1", as in hotreload.dev~1injected.
func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
