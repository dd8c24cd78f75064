package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

func TestReadVisible(t *testing.T) {
	v := kubelet.New(filepath.Join(t.TempDir(), "vol"))
	if _, err := v.Write(map[string]kubelet.File{
		"a.conf":          {Data: []byte("12345")},
		"nested/b.conf":   {Data: []byte("123")},
		"nested/c/d.conf": {Data: []byte("1")},
	}); err != nil {
		t.Fatal(err)
	}
	// A name of the kubelet's kind is not the app's: not read.
	if err := os.WriteFile(filepath.Join(v.Dir, "..hidden"), []byte("not read"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := readVisible(v.Dir, h)
	if err != nil {
		t.Fatal(err)
	}
	if n != 9 {
		t.Errorf("readVisible read %d bytes, want 9 (the three visible files)", n)
	}
	if got, want := h.Sum(nil), sha256.Sum256([]byte("12345"+"123"+"1")); !bytes.Equal(got, want[:]) {
		t.Errorf("readVisible hashed %x, want %x (the visible files in the order of their names)", got, want)
	}
	if _, err := readVisible(filepath.Join(v.Dir, "missing"), sha256.New()); err == nil {
		t.Error("readVisible of a missing directory: no error")
	}
}

func TestParseArgs(t *testing.T) {
	c, err := parseArgs([]string{"--url=http://app/-/reload", "--read", "--debounce=100ms", "/a", "/b"})
	if err != nil {
		t.Fatal(err)
	}
	if c.url != "http://app/-/reload" || !c.read || c.debounce != 100*time.Millisecond || len(c.dirs) != 2 {
		t.Errorf("parseArgs = %+v", c)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"/a"}, "--url is required"},
		{[]string{"--url=http://app/"}, "no directory to watch"},
		{[]string{"--url=http://app/", "--debounce=-1s", "/a"}, "--debounce=-1s is negative"},
		{[]string{"--url=http://app/", "--debounce=soon", "/a"}, `invalid value "soon" for flag -debounce`},
	} {
		_, err := parseArgs(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseArgs(%q) error = %v, want %q", tc.args, err, tc.want)
		}
	}
}
