package watcher

import (
	"encoding/hex"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestHashDirPinned pins HashDir's value for a small fixed tree: hotreload
// stores these hashes in its state file, so a different value for the same
// content would reload every app after an upgrade. The tree has each kind of
// record a test can make as root: files through the kubelet's links (a key
// and a nested item), a plain file, a plain nested directory, a second path
// to a directory (an alias), and a file that fails to read otherwise than by
// permission (unreadable). Nothing in the kubelet's hidden entries (the
// version directory's name) is hashed, so the value is the same on every
// run.
func TestHashDirPinned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	writeTree(t, dir, map[string]string{
		"..2026_01_02_03_04_05.123/app.properties":     "color=blue\n",
		"..2026_01_02_03_04_05.123/conf.d/nested.conf": "nested=1\n",
		"extra.txt":         "plain file\n",
		"plain/sub/x.conf":  strings.Repeat("x", 40000), // longer than one read
		"plain/sub/y.conf":  "",
		"plain/broken.conf": "unread",
	})
	symlink(t, "..2026_01_02_03_04_05.123", filepath.Join(dir, "..data"))
	symlink(t, "..data/app.properties", filepath.Join(dir, "app.properties"))
	symlink(t, "..data/conf.d", filepath.Join(dir, "conf.d"))
	symlink(t, "plain/sub", filepath.Join(dir, "alias"))

	const readable = "2da17e201c4e331b1c56b06052878ab10716c06159fe6c3d1d597b5616e5e951"
	for _, tt := range []struct {
		name string
		h    hasher
		want string
	}{
		{"readable", hasher{}, readable},
		{"one unreadable", failOpen("broken.conf", syscall.EIO), "f6744bd3ea07ab9555d93103e5ba8dbe2d215119b7c83c31e1aad9d2b2d17872"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.h.hash(dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if res.partial != "" || res.broken != "" {
				t.Fatalf("the tree looks partial (%q) or broken (%q)", res.partial, res.broken)
			}
			if got := hex.EncodeToString(res.sum[:]); got != tt.want {
				t.Errorf("hash = %s, want %s (HashDir's value must never change)", got, tt.want)
			}
		})
	}
	if sum, err := HashDir(dir); err != nil || hex.EncodeToString(sum[:]) != readable {
		t.Errorf("HashDir = %x, %v; want %s", sum, err, readable)
	}
}
