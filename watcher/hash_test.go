package watcher

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubelet"
)

// writeTree writes files (relative slash paths to contents) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeVolume writes files into dir the way the kubelet does.
func writeVolume(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	payload := make(map[string]kubelet.File, len(files))
	for k, v := range files {
		payload[k] = kubelet.File{Data: []byte(v)}
	}
	if _, err := kubelet.New(dir).Write(payload); err != nil {
		t.Fatal(err)
	}
}

func mustHash(t testing.TB, dir string) [32]byte {
	t.Helper()
	sum, err := HashDir(dir)
	if err != nil {
		t.Fatalf("HashDir(%s): %v", dir, err)
	}
	return sum
}

// failOpen is a hasher whose open of any file named base fails with errno,
// as it would for a file root cannot be denied (EACCES: another UID's
// 0600 Secret item) or a failing disk (EIO); other files open as usual.
func failOpen(base string, errno syscall.Errno) hasher {
	return hasher{open: func(name string) (*os.File, error) {
		if filepath.Base(name) == base {
			return nil, &fs.PathError{Op: "open", Path: name, Err: errno}
		}
		return openRegular(name)
	}}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

var baseFiles = map[string]string{
	"app.properties":      "color=blue\n",
	"conf.d/default.conf": "listen 80;\n",
	"conf.d/tls/key.pem":  "-----BEGIN-----\n",
}

func TestHashDirEqual(t *testing.T) {
	// Each case builds two directories that must hash the same.
	tests := []struct {
		name string
		a, b func(t *testing.T, dir string)
	}{
		{
			name: "kubelet volumes with different version dir names",
			a:    func(t *testing.T, dir string) { writeVolume(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeVolume(t, dir, map[string]string{"x": "other"})
				writeVolume(t, dir, baseFiles)
			},
		},
		{
			name: "kubelet volume and plain directory",
			a:    func(t *testing.T, dir string) { writeVolume(t, dir, baseFiles) },
			b:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
		},
		{
			name: "mode change",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				if err := os.Chmod(filepath.Join(dir, "app.properties"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(dir, "conf.d"), 0o700); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "times change",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
				if err := os.Chtimes(filepath.Join(dir, "app.properties"), old, old); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "dot-dot names ignored at every level",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				writeTree(t, dir, map[string]string{
					"..hidden":          "x",
					"..2026_01_01/file": "x",
					"conf.d/..tmp":      "x",
					"conf.d/..d/file":   "x",
				})
				symlink(t, "..2026_01_01", filepath.Join(dir, "..data_tmp"))
			},
		},
		{
			name: "empty subdirectory",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "symlinks to a file and a directory are followed",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				outside := t.TempDir()
				writeTree(t, outside, baseFiles)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				symlink(t, filepath.Join(outside, "app.properties"), filepath.Join(dir, "app.properties"))
				symlink(t, filepath.Join(outside, "conf.d"), filepath.Join(dir, "conf.d"))
			},
		},
		{
			name: "dangling symlink left out",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				symlink(t, "nowhere", filepath.Join(dir, "dangling"))
			},
		},
		{
			name: "FIFO and socket-like entries left out",
			a:    func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			b: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
					e2etest.SkipOrFail(t, "mkfifo: %v", err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
			tt.a(t, a)
			tt.b(t, b)
			if ha, hb := mustHash(t, a), mustHash(t, b); ha != hb {
				t.Errorf("hashes differ: %x != %x", ha, hb)
			}
		})
	}
}

func TestHashDirDiffers(t *testing.T) {
	// Each case changes a copy of baseFiles; the hash must change.
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"content", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"app.properties": "color=green\n"})
		}},
		{"nested content", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"conf.d/tls/key.pem": "-----OTHER-----\n"})
		}},
		{"renamed file", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "app.properties"), filepath.Join(dir, "app.props")); err != nil {
				t.Fatal(err)
			}
		}},
		{"moved to another directory", func(t *testing.T, dir string) {
			if err := os.Rename(filepath.Join(dir, "conf.d", "default.conf"), filepath.Join(dir, "default.conf")); err != nil {
				t.Fatal(err)
			}
		}},
		{"new empty file", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"empty": ""})
		}},
		{"removed file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "app.properties")); err != nil {
				t.Fatal(err)
			}
		}},
		{"dot file is visible", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{".env": "x"})
		}},
		{"bytes moved between files", func(t *testing.T, dir string) {
			writeTree(t, dir, map[string]string{"app.properties": "color=blue\nlisten 80;\n", "conf.d/default.conf": ""})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, baseFiles)
			before := mustHash(t, dir)
			tt.change(t, dir)
			if after := mustHash(t, dir); after == before {
				t.Errorf("hash unchanged: %x", after)
			}
		})
	}
}

func TestHashDirEmpty(t *testing.T) {
	if got := mustHash(t, t.TempDir()); got != emptyHash {
		t.Errorf("empty dir hash = %x, want %x", got, emptyHash)
	}
}

func TestHashDirRootErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeTree(t, dir, map[string]string{"file": "x"})
	tests := []struct {
		name string
		root string
		want error
	}{
		{"missing", filepath.Join(dir, "missing"), fs.ErrNotExist},
		{"file", file, errNotDir},
		{"below a file", filepath.Join(file, "x"), syscall.ENOTDIR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := HashDir(tt.root)
			if !errors.Is(err, tt.want) {
				t.Errorf("HashDir(%s) error = %v, want %v", tt.root, err, tt.want)
			}
		})
	}
}

// TestHashDirProblems checks that loops, dangling links and unreadable
// entries terminate, are reported once each, and do not hide the rest.
func TestHashDirProblems(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  map[string]error // problem path -> kind
	}{
		{
			name: "link to the root",
			setup: func(t *testing.T, dir string) {
				symlink(t, ".", filepath.Join(dir, "self"))
			},
			want: map[string]error{"self": errSymlinkLoop},
		},
		{
			name: "link to a parent inside a subdirectory",
			setup: func(t *testing.T, dir string) {
				symlink(t, "../..", filepath.Join(dir, "conf.d", "tls", "up"))
			},
			want: map[string]error{"conf.d/tls/up": errSymlinkLoop},
		},
		{
			name: "link to the parent of the root",
			setup: func(t *testing.T, dir string) {
				symlink(t, "..", filepath.Join(dir, "up"))
			},
			want: map[string]error{"up/vol": errSymlinkLoop},
		},
		{
			name: "loop of symlinks",
			setup: func(t *testing.T, dir string) {
				symlink(t, "b", filepath.Join(dir, "a"))
				symlink(t, "a", filepath.Join(dir, "b"))
			},
			want: map[string]error{"a": nil, "b": nil},
		},
		{
			name: "dangling symlink",
			setup: func(t *testing.T, dir string) {
				symlink(t, "gone", filepath.Join(dir, "conf.d", "link"))
			},
			want: map[string]error{"conf.d/link": errDanglingLink},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			writeTree(t, dir, baseFiles)
			tt.setup(t, dir)

			done := make(chan struct{})
			var res hashResult
			var err error
			go func() {
				defer close(done)
				res, err = hasher{open: openRegular}.hash(dir, nil, nil)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("hash did not terminate within 10s")
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make(map[string]error)
			for _, p := range res.problems {
				if _, dup := got[p.path]; dup {
					t.Errorf("problem %s reported twice", p.path)
				}
				got[p.path] = p.err
			}
			if len(got) != len(tt.want) {
				t.Errorf("problems = %v, want %v", got, tt.want)
			}
			for path, kind := range tt.want {
				err, ok := got[path]
				if !ok {
					t.Errorf("no problem reported for %s; got %v", path, got)
					continue
				}
				if kind != nil && !errors.Is(err, kind) {
					t.Errorf("problem for %s = %v, want %v", path, err, kind)
				}
			}
			// The regular files are still hashed.
			plain := t.TempDir()
			writeTree(t, plain, baseFiles)
			if res.sum != mustHash(t, plain) {
				t.Error("a problem changed the hash of the other files")
			}
		})
	}
}

func TestHashDirAliases(t *testing.T) {
	dir := t.TempDir()
	shared := t.TempDir()
	writeTree(t, shared, map[string]string{"f": "1"})
	symlink(t, shared, filepath.Join(dir, "a"))
	symlink(t, shared, filepath.Join(dir, "b"))

	var watched []string
	res, err := hasher{open: openRegular}.hash(dir, nil, func(d string) { watched = append(watched, d) })
	if err != nil {
		t.Fatal(err)
	}
	if len(res.problems) != 0 {
		t.Errorf("two links to one directory reported problems: %v", res.problems)
	}
	if !slices.Contains(watched, shared) {
		t.Errorf("the linked directory %s is not in the watch set %v", shared, watched)
	}
	writeTree(t, shared, map[string]string{"f": "2"})
	if mustHash(t, dir) == res.sum {
		t.Error("a change in a directory linked twice did not change the hash")
	}
}

func TestHashDirUnreadable(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, baseFiles)
	readable := mustHash(t, dir)
	secret := filepath.Join(dir, "conf.d", "tls", "key.pem")
	denied := hasher{open: func(name string) (*os.File, error) {
		if name == secret {
			return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EACCES}
		}
		return openRegular(name)
	}}
	res, err := denied.hash(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.problems) != 1 || res.problems[0].path != "conf.d/tls/key.pem" || !errors.Is(res.problems[0].err, fs.ErrPermission) {
		t.Errorf("problems = %v, want one permission problem for conf.d/tls/key.pem", res.problems)
	}
	if res.sum == readable {
		t.Error("an unreadable file hashes like the readable one")
	}
	if err := os.Remove(secret); err != nil {
		t.Fatal(err)
	}
	if res.sum == mustHash(t, dir) {
		t.Error("an unreadable file hashes like no file at all")
	}
}

// TestHashDirWatchSet checks which directories a hash watches: the root
// and what it walks, but nothing of the version directory that ..data names
// (the kubelet never writes into it); directories reached through symlinks,
// and the directory of a file reached through one.
func TestHashDirWatchSet(t *testing.T) {
	root := t.TempDir()
	kube := filepath.Join(root, "vol")
	writeVolume(t, kube, baseFiles)
	plain := filepath.Join(root, "plain")
	writeTree(t, plain, baseFiles)
	outside := filepath.Join(root, "outside")
	writeTree(t, outside, map[string]string{"dir/f": "f", "file": "x"})
	symlink(t, filepath.Join(outside, "dir"), filepath.Join(plain, "linked"))
	symlink(t, filepath.Join(outside, "file"), filepath.Join(plain, "file"))
	for dir, want := range map[string][]string{
		kube:  {kube},
		plain: {plain, filepath.Join(plain, "conf.d"), filepath.Join(plain, "conf.d", "tls"), filepath.Join(outside, "dir"), outside},
	} {
		var watched []string
		if _, err := (hasher{}).hash(dir, nil, func(d string) { watched = append(watched, d) }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(watched)
		slices.Sort(want)
		if !slices.Equal(watched, want) {
			t.Errorf("%s: watched %v, want %v", filepath.Base(dir), watched, want)
		}
	}
}

func BenchmarkHashDir(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "vol")
	files := make(map[string]string)
	data := strings.Repeat("x", 4096)
	for i := range 20 {
		files[fmt.Sprintf("file%02d.conf", i)] = data
	}
	writeVolume(b, dir, files)
	b.SetBytes(20 * 4096)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := HashDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHashDirStates checks how a hash classifies a volume: whole, half-way
// through a kubelet update (partial), or broken; and that the hash is
// always that of what the visible names show.
func TestHashDirStates(t *testing.T) {
	// swap makes ..v2 (holding files) the version ..data names, as steps
	// 4 to 8 of the kubelet's update do, without touching visible links.
	swap := func(t *testing.T, dir string, files map[string]string) {
		t.Helper()
		for k, v := range files {
			writeTree(t, dir, map[string]string{"..v2/" + k: v})
		}
		symlink(t, "..v2", filepath.Join(dir, "..data_tmp"))
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string)
		visible  map[string]string // what an app sees
		partial  string            // substring of the reason; "" for none
		broken   string
		problems int // dangling links that are not the kubelet's
	}{
		{
			name:    "kubelet volume",
			setup:   func(t *testing.T, dir string) { writeVolume(t, dir, baseFiles) },
			visible: baseFiles,
		},
		{
			name: "kubelet volume whose link names another item",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				relink(t, "..data/conf.d/default.conf", filepath.Join(dir, "app.properties"))
			},
			visible: map[string]string{"app.properties": "listen 80;\n", "conf.d/default.conf": "listen 80;\n", "conf.d/tls/key.pem": baseFiles["conf.d/tls/key.pem"]},
		},
		{
			name:    "kubelet volume of many items",
			setup:   func(t *testing.T, dir string) { writeVolume(t, dir, itemFiles(100)) },
			visible: itemFiles(100),
		},
		{
			name: "kubelet volume with a file of its own in the root",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				writeTree(t, dir, map[string]string{"extra.conf": "x"})
			},
			visible: withFile(baseFiles, "extra.conf", "x"),
		},
		{
			name: "kubelet volume with a link of its own in the root",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				outside := filepath.Join(t.TempDir(), "outside.conf")
				writeTree(t, filepath.Dir(outside), map[string]string{"outside.conf": "o"})
				symlink(t, outside, filepath.Join(dir, "extra.conf"))
			},
			visible: withFile(baseFiles, "extra.conf", "o"),
		},
		{
			name: "kubelet volume with a key link replaced by a file",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				if err := os.Remove(filepath.Join(dir, "app.properties")); err != nil {
					t.Fatal(err)
				}
				writeTree(t, dir, map[string]string{"app.properties": "mine"})
			},
			visible: withFile(baseFiles, "app.properties", "mine"),
		},
		{
			name:    "plain directory",
			setup:   func(t *testing.T, dir string) { writeTree(t, dir, baseFiles) },
			visible: baseFiles,
		},
		{
			name: "empty plain directory",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "new key not linked yet",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, map[string]string{"a": "1"})
				swap(t, dir, map[string]string{"a": "2", "b": "2"})
			},
			visible: map[string]string{"a": "2"},
			partial: "item b has no visible link yet",
		},
		{
			name: "vanished key not unlinked yet",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, map[string]string{"a": "1", "b": "1"})
				swap(t, dir, map[string]string{"a": "2"})
			},
			visible: map[string]string{"a": "2"},
			partial: "visible link b names a vanished item",
		},
		{
			name: "swap under way",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, map[string]string{"a": "1"})
				writeTree(t, dir, map[string]string{"..v2/a": "2"})
				symlink(t, "..v2", filepath.Join(dir, "..data_tmp"))
			},
			visible: map[string]string{"a": "1"},
			partial: "..data_tmp exists",
		},
		{
			name: "dangling ..data",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				symlink(t, "..gone", filepath.Join(dir, "..data"))
			},
			broken: "..data names no directory",
		},
		{
			name: "..data names a file",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, map[string]string{"a": "1"})
				writeTree(t, dir, map[string]string{"..file": "x"})
				if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
				symlink(t, "..file", filepath.Join(dir, "..data"))
			},
			broken: "..data names no directory",
		},
		{
			name: "every visible entry dangles",
			setup: func(t *testing.T, dir string) {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				symlink(t, "nowhere", filepath.Join(dir, "a"))
				symlink(t, "../nowhere", filepath.Join(dir, "b"))
			},
			broken:   "every visible entry dangles",
			problems: 2,
		},
		{
			name: "one dangling link beside files is only a problem",
			setup: func(t *testing.T, dir string) {
				writeTree(t, dir, baseFiles)
				symlink(t, "nowhere", filepath.Join(dir, "a"))
			},
			visible:  baseFiles,
			problems: 1,
		},
		{
			name: "empty directory in the published version",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				version, err := os.Readlink(filepath.Join(dir, "..data"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(filepath.Join(dir, version, "conf.d", "tls", "key.pem")); err != nil {
					t.Fatal(err)
				}
			},
			visible: map[string]string{"app.properties": "color=blue\n", "conf.d/default.conf": "listen 80;\n"},
			partial: "directory conf.d/tls of the version that ..data names is empty",
		},
		{
			name: "published version changed after the swap",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, baseFiles)
				version, err := os.Readlink(filepath.Join(dir, "..data"))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.RemoveAll(filepath.Join(dir, version, "conf.d", "tls")); err != nil {
					t.Fatal(err)
				}
				// Later than the swap on any clock granularity.
				later := time.Now().Add(time.Minute)
				if err := os.Chtimes(filepath.Join(dir, version, "conf.d"), later, later); err != nil {
					t.Fatal(err)
				}
			},
			visible: map[string]string{"app.properties": "color=blue\n", "conf.d/default.conf": "listen 80;\n"},
			partial: "changed after ..data was swapped to it",
		},
		{
			name: "..data deleted, links left",
			setup: func(t *testing.T, dir string) {
				writeVolume(t, dir, map[string]string{"a": "1"})
				writeTree(t, dir, map[string]string{"plain": "p"})
				if err := os.Remove(filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
			},
			visible: map[string]string{"plain": "p"},
			partial: "visible link a names a vanished item",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "vol")
			tt.setup(t, dir)
			res, err := hasher{open: openRegular}.hash(dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := plainHash(t, tt.visible); res.sum != want {
				t.Errorf("hash = %x, want that of %v", res.sum[:6], tt.visible)
			}
			if (res.partial == "") != (tt.partial == "") || !strings.Contains(res.partial, tt.partial) {
				t.Errorf("partial = %q, want %q", res.partial, tt.partial)
			}
			if (res.broken == "") != (tt.broken == "") || !strings.Contains(res.broken, tt.broken) {
				t.Errorf("broken = %q, want %q", res.broken, tt.broken)
			}
			if len(res.problems) != tt.problems {
				t.Errorf("problems = %v, want %d: the kubelet's own links are not problems", res.problems, tt.problems)
			}
		})
	}
}

// itemFiles returns n files, one line each.
func itemFiles(n int) map[string]string {
	m := make(map[string]string, n)
	for i := range n {
		m[fmt.Sprintf("key%03d.conf", i)] = fmt.Sprintf("value %d\n", i)
	}
	return m
}

// withFile returns files with name set to content.
func withFile(files map[string]string, name, content string) map[string]string {
	m := maps.Clone(files)
	m[name] = content
	return m
}

// TestHashDirStable pins the hash of two small directories to the values
// that earlier versions computed: the state file keeps hashes across
// restarts and upgrades, and a hash that changed its definition would
// reload every target once after an upgrade.
func TestHashDirStable(t *testing.T) {
	base := t.TempDir()
	plain := filepath.Join(base, "d")
	writeTree(t, plain, map[string]string{"a": "a\n", "sub/b": "b\n"})
	writeTree(t, filepath.Join(base, "other"), map[string]string{"o": "o\n"})
	symlink(t, "../other", filepath.Join(plain, "l1"))
	symlink(t, "../other", filepath.Join(plain, "l2")) // an alias of l1
	kube := filepath.Join(base, "k")
	writeTree(t, kube, map[string]string{"..v1/x": "x\n"})
	symlink(t, "..v1", filepath.Join(kube, dataLink))
	symlink(t, "..data/x", filepath.Join(kube, "x"))
	for dir, want := range map[string]string{
		plain: "73fc0840525beca5ff2b237d02ae3df48cf0c778d06f54fa1ad1826ce01f5e35",
		kube:  "0d9c8405c6493b235b66459cebba84ad2e2238b83239d8b69cc29646eefc3e90",
	} {
		if got := fmt.Sprintf("%x", mustHash(t, dir)); got != want {
			t.Errorf("HashDir(%s) = %s, want %s as before", filepath.Base(dir), got, want)
		}
	}
}
