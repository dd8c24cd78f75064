// Package revision names the content of a ConfigMap or Secret the same way
// on both sides of a rollout: hotreload-controller computes the canonical
// sum from the object's data maps, and the sidecar from the files of a
// kubelet volume that projects the whole object. Equal content gives equal
// sums on both sides; the sum never depends on file modes, the volume's
// version directory, or the reserved key that carries the rollout's state.
//
// The sum is SHA-256 over the entries sorted by path, each written as the
// path's length (uvarint), the path, the content's length (uvarint), and
// the content. See docs/design/fleet.md.
package revision

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// ReservedKey is the key of the stable copy that holds the rollout's state
// (see Rollout). It is never part of a sum, never read as content from a
// volume, and never written into an app's directory.
const ReservedKey = ".hotreload-rollout.json"

// File is one entry of a revision: a ConfigMap or Secret key, or a file of
// a volume.
type File struct {
	Path string      // slash separated, relative: "app.yaml", "conf.d/a.conf"
	Data []byte      // the content
	Mode fs.FileMode // permission bits as found on disk; 0 for a key of an API object
}

// Sum returns the canonical sum of files: SHA-256 over the entries sorted
// by path, each as uvarint(len(path)), path, uvarint(len(data)), data. An
// entry whose path is ReservedKey is left out. files is not changed.
func Sum(files []File) [32]byte {
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, f := range sorted {
		if f.Path == ReservedKey {
			continue
		}
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f.Path)))])
		h.Write([]byte(f.Path))
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(f.Data)))])
		h.Write(f.Data)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// ConfigMapFiles returns the entries of a ConfigMap: every key of data (its
// value as UTF-8 bytes) and of binaryData, sorted by path, without
// ReservedKey. A key in both maps (the API server refuses that) keeps the
// value of data.
func ConfigMapFiles(data map[string]string, binaryData map[string][]byte) []File {
	files := make([]File, 0, len(data)+len(binaryData))
	for k, v := range data {
		if k != ReservedKey {
			files = append(files, File{Path: k, Data: []byte(v)})
		}
	}
	for k, v := range binaryData {
		if _, dup := data[k]; !dup && k != ReservedKey {
			files = append(files, File{Path: k, Data: v})
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// SecretFiles returns the entries of a Secret: every key of data, sorted by
// path, without ReservedKey.
func SecretFiles(data map[string][]byte) []File {
	files := make([]File, 0, len(data))
	for k, v := range data {
		if k != ReservedKey {
			files = append(files, File{Path: k, Data: v})
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// ConfigMapSum is the sum of a ConfigMap's content.
func ConfigMapSum(data map[string]string, binaryData map[string][]byte) [32]byte {
	return Sum(ConfigMapFiles(data, binaryData))
}

// SecretSum is the sum of a Secret's content.
func SecretSum(data map[string][]byte) [32]byte { return Sum(SecretFiles(data)) }

// Hex writes a sum as 64 lowercase hex digits, as the reserved key holds it.
func Hex(sum [32]byte) string { return hex.EncodeToString(sum[:]) }

// ParseHex reads a sum written by Hex.
func ParseHex(s string) ([32]byte, error) {
	var sum [32]byte
	if len(s) != 2*len(sum) {
		return sum, fmt.Errorf("sha256 %.80q: want 64 hex digits", s)
	}
	if _, err := hex.Decode(sum[:], []byte(s)); err != nil || strings.ToLower(s) != s {
		return sum, fmt.Errorf("sha256 %.80q: want 64 lowercase hex digits", s)
	}
	return sum, nil
}
