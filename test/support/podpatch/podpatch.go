// Package podpatch applies a JSON patch (RFC 6902) to a pod as the API
// server applies a mutating webhook's: test support for the injector's
// tests and the examples', never linked by a binary.
package podpatch

import (
	"encoding/json"
	"fmt"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
)

// Apply returns p with patch applied; patch is anything that marshals to
// the patch's JSON, such as the injector's []injector.Op.
func Apply(p *corev1.Pod, patch any) (*corev1.Pod, error) {
	doc, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	decoded, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, fmt.Errorf("decode patch: %w", err)
	}
	out, err := decoded.Apply(doc)
	if err != nil {
		return nil, fmt.Errorf("apply patch %s: %w", raw, err)
	}
	var got corev1.Pod
	if err := json.Unmarshal(out, &got); err != nil {
		return nil, err
	}
	return &got, nil
}
