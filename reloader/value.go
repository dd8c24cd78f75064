package reloader

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// The content value of a volume is what hotreload shows of its content
// outside the process: in hotreload_volume_content_info, /-/content and the
// state file. Pods with the same content must show the same value (a
// rollout joins a pod to the revision it runs by it), and no one who can
// read it may learn the content: a short secret (a 6-digit PIN) is found
// from a plain SHA-256 by trying every value. So:
//
//   - with Options.Key, the value is HMAC-SHA256(key, content hash): pods
//     that share the key show the same value for the same content, and
//     without the key nothing can be tried;
//   - without a key, a volume that may hold a Secret (Options.Sensitive: a
//     Secret, projected or downwardAPI volume, which the kubelet puts on
//     tmpfs) has no value at all: it is shown nowhere and not kept;
//   - any other volume (a ConfigMap) shows the content hash itself, as
//     anyone who may read the ConfigMap can compute it.
//
// The content hash is the watcher's SHA-256 over the relative paths and
// bytes of the files the app sees (watcher.HashDir). The label and
// /-/content show the value's first 12 hex digits; the state file keeps
// all 64, and the key's id, so that a restart with another key knows its
// values cannot be compared.

// value returns the content value of dir holding content hash h, in hex, or
// false when it has none.
func (r *Reloader) value(dir string, h [32]byte) (string, bool) {
	switch {
	case r.opts.Key != nil:
		m := hmac.New(sha256.New, r.opts.Key)
		m.Write(h[:])
		return hex.EncodeToString(m.Sum(nil)), true
	case r.opts.Sensitive != nil && r.opts.Sensitive(dir):
		return "", false
	}
	return hex.EncodeToString(h[:]), true
}

// keyID names the key of the values in the state file without giving it
// away: "" without a key.
func keyID(key []byte) string {
	if key == nil {
		return ""
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("hotreload content key id"))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// shortValue is a value as the label and /-/content show it: its first 12
// hex digits.
func shortValue(v string) string { return v[:min(len(v), 12)] }
