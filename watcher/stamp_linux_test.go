package watcher

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// TestReadRawSizes reads files around the buffer's size: every byte is
// hashed, and the count matches, whether the last read is short, full, or
// the file is empty.
func TestReadRawSizes(t *testing.T) {
	const bufSize = 4096
	buf := make([]byte, bufSize)
	for _, size := range []int{0, 1, bufSize - 1, bufSize, bufSize + 1, 3*bufSize + 7} {
		data := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
		name := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		d := sha256.New()
		n, st, ok, err := readRaw(d, name, buf)
		if !ok || err != nil {
			t.Fatalf("size %d: readRaw = ok %v, err %v", size, ok, err)
		}
		if n != int64(size) || st.size != int64(size) {
			t.Errorf("size %d: read %d bytes, stamp size %d", size, n, st.size)
		}
		if got, want := [32]byte(d.Sum(nil)), sha256.Sum256(data); got != want {
			t.Errorf("size %d: digest %x, want %x", size, got[:6], want[:6])
		}
	}
}
