package controller

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// podMarks is what a pod's volumes are known to hold: for each resource, the
// highest resourceVersion at or below which every object of that resource is
// current in the pod.
type podMarks struct {
	configMap, secret string
}

func (m *podMarks) get(k Kind) string {
	if k == Secret {
		return m.secret
	}
	return m.configMap
}

// raise moves the mark of kind k up to rv; it never moves a mark down.
func (m *podMarks) raise(k Kind, rv string) {
	p := &m.configMap
	if k == Secret {
		p = &m.secret
	}
	if newer(rv, *p) {
		*p = rv
	}
}

// marks holds the marks of every opted-in pod, by uid. Not safe for
// concurrent use: the controller guards it.
type marks map[types.UID]*podMarks

// newer reports whether resourceVersion a is after b. The empty b is before
// everything. Versions that are not the API server's integers cannot be
// ordered: then a differing a counts as newer, which costs at most a nudge.
// Newer reports whether resourceVersion a is newer than b, compared as the
// API server's storage makes them (numbers); "" is older than anything, and
// a version that is not a number counts as newer whenever it differs.
func Newer(a, b string) bool { return newer(a, b) }

func newer(a, b string) bool {
	if a == "" {
		return false
	}
	if b == "" {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(a, b)
	if err != nil {
		return a != b
	}
	return c > 0
}
