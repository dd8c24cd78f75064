package appdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/test/support/kubelet"
)

// files builds revision files from pairs of path and content.
func files(pathsAndData ...string) []revision.File {
	var out []revision.File
	for i := 0; i < len(pathsAndData); i += 2 {
		out = append(out, revision.File{Path: pathsAndData[i], Data: []byte(pathsAndData[i+1])})
	}
	return out
}

// layout describes a directory as the test compares it: every entry, with
// a link's target and a file's content, version directories named by
// their label.
func layout(t *testing.T, dir string) []string {
	t.Helper()
	labels := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if isVersionName(e.Name()) {
			b, err := os.ReadFile(filepath.Join(dir, e.Name(), labelFile))
			if errors.Is(err, fs.ErrNotExist) {
				b = []byte("unlabelled") // the kubelet's
			}
			labels[e.Name()] = "<" + string(b) + ">"
		}
	}
	name := func(n string) string {
		for v, l := range labels {
			n = strings.ReplaceAll(n, v, l)
		}
		return n
	}
	var out []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case rel == ".":
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out = append(out, name(rel)+" -> "+name(target))
		case d.IsDir():
			info, _ := d.Info()
			out = append(out, fmt.Sprintf("%s/ %v", name(rel), info.Mode().Perm()))
		default:
			b, _ := os.ReadFile(p)
			info, _ := d.Info()
			out = append(out, fmt.Sprintf("%s %v %q", name(rel), info.Mode().Perm(), b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func check(t *testing.T, dir string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := layout(t, dir); !slices.Equal(got, want) {
		t.Errorf("layout:\n\t%s\nwant:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

func open(t *testing.T, dir string) *Dir {
	t.Helper()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func write(t *testing.T, d *Dir, label string, fs []revision.File) {
	t.Helper()
	if err := d.Write(fs, label); err != nil {
		t.Fatal(err)
	}
}

// TestKubeletLayout: the same payload written by Write and by the
// kubelet's writer gives the same directory, but for the label.
func TestKubeletLayout(t *testing.T) {
	payload := map[string]kubelet.File{
		"app.yaml":          {Data: []byte("a: 1\n")},
		"conf.d/x.conf":     {Data: []byte("x")},
		"conf.d/sub/y.conf": {Data: []byte("y"), Mode: 0o600},
		"empty":             {},
	}
	ref := filepath.Join(t.TempDir(), "kubelet")
	if _, err := kubelet.New(ref).Write(payload); err != nil {
		t.Fatal(err)
	}
	var fs []revision.File
	for p, f := range payload {
		fs = append(fs, revision.File{Path: p, Data: f.Data, Mode: f.Mode})
	}
	dir := filepath.Join(t.TempDir(), "app")
	write(t, open(t, dir), "v1", fs)

	got := layout(t, dir)
	want := layout(t, ref)
	var mine []string
	for _, l := range got {
		if strings.Contains(l, labelFile) {
			continue
		}
		mine = append(mine, l)
	}
	for i := range want {
		want[i] = strings.ReplaceAll(want[i], "<unlabelled>", "<v1>")
	}
	if !slices.Equal(mine, want) {
		t.Errorf("app's directory:\n\t%s\nkubelet's volume:\n\t%s", strings.Join(mine, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// TestLastKnownGood walks the life of a directory: writes, a commit, a
// write over an unconfirmed one, and a restore.
func TestLastKnownGood(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "app")
	d := open(t, dir)
	if _, ok := d.Current(); ok {
		t.Fatal("an empty directory has a current version")
	}
	if _, err := d.Restore(); !errors.Is(err, ErrNoLastGood) {
		t.Fatalf("Restore of an empty directory = %v, want ErrNoLastGood", err)
	}

	write(t, d, "v1", files("a", "1", "b", "1"))
	check(t, dir,
		"..data -> <v1>", "<v1>/ -rwxr-xr-x", "<v1>/..hotreload -rw-r--r-- \"v1\"",
		`<v1>/a -rw-r--r-- "1"`, `<v1>/b -rw-r--r-- "1"`, "a -> ..data/a", "b -> ..data/b")
	if _, ok := d.LastGood(); ok {
		t.Error("the first version has a last-known-good one")
	}

	// v2 replaces b by c: v1 is kept as last-known-good.
	write(t, d, "v2", files("a", "2", "c", "2"))
	check(t, dir,
		"..data -> <v2>", "..last_good -> <v1>",
		"<v1>/ -rwxr-xr-x", "<v1>/..hotreload -rw-r--r-- \"v1\"", `<v1>/a -rw-r--r-- "1"`, `<v1>/b -rw-r--r-- "1"`,
		"<v2>/ -rwxr-xr-x", "<v2>/..hotreload -rw-r--r-- \"v2\"", `<v2>/a -rw-r--r-- "2"`, `<v2>/c -rw-r--r-- "2"`,
		"a -> ..data/a", "c -> ..data/c")
	if cur, _ := d.Current(); cur.Label != "v2" {
		t.Errorf("current %+v, want v2", cur)
	}
	if good, _ := d.LastGood(); good.Label != "v1" {
		t.Errorf("last good %+v, want v1", good)
	}

	if err := d.Commit(); err != nil {
		t.Fatal(err)
	}
	check(t, dir,
		"..data -> <v2>", "<v2>/ -rwxr-xr-x", "<v2>/..hotreload -rw-r--r-- \"v2\"", `<v2>/a -rw-r--r-- "2"`, `<v2>/c -rw-r--r-- "2"`,
		"a -> ..data/a", "c -> ..data/c")

	// v3, then v4 before v3 was committed: v2 stays the one to go back to.
	write(t, d, "v3", files("a", "3", "d/e", "3"))
	write(t, d, "v4", files("a", "4"))
	check(t, dir,
		"..data -> <v4>", "..last_good -> <v2>",
		"<v2>/ -rwxr-xr-x", "<v2>/..hotreload -rw-r--r-- \"v2\"", `<v2>/a -rw-r--r-- "2"`, `<v2>/c -rw-r--r-- "2"`,
		"<v4>/ -rwxr-xr-x", "<v4>/..hotreload -rw-r--r-- \"v4\"", `<v4>/a -rw-r--r-- "4"`,
		"a -> ..data/a")

	v, err := d.Restore()
	if err != nil || v.Label != "v2" {
		t.Fatalf("Restore = %+v, %v, want v2", v, err)
	}
	check(t, dir,
		"..data -> <v2>", "<v2>/ -rwxr-xr-x", "<v2>/..hotreload -rw-r--r-- \"v2\"", `<v2>/a -rw-r--r-- "2"`, `<v2>/c -rw-r--r-- "2"`,
		"a -> ..data/a", "c -> ..data/c")
	if _, err := d.Restore(); !errors.Is(err, ErrNoLastGood) {
		t.Errorf("second Restore = %v, want ErrNoLastGood", err)
	}
	got, err := d.Files()
	if err != nil || revision.Sum(got) != revision.Sum(files("a", "2", "c", "2")) {
		t.Errorf("Files = %v, %v, want v2's", got, err)
	}

	// A restart finds the directory as it was, and nothing to clean.
	d2 := open(t, dir)
	if len(d2.Cleaned()) != 0 {
		t.Errorf("Open after a clean stop cleaned %v", d2.Cleaned())
	}
	if cur, _ := d2.Current(); cur.Label != "v2" {
		t.Errorf("current after reopening %+v, want v2", cur)
	}
}

func TestRefused(t *testing.T) {
	t.Run("foreign entry", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "app.yaml"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir)
		want := dir + " holds app.yaml, which hotreload did not write: give an empty directory (an emptyDir) that only hotreload writes"
		if err == nil || err.Error() != want {
			t.Errorf("Open = %v, want %q", err, want)
		}
	})
	t.Run("a file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(f); err == nil {
			t.Error("Open of a file succeeded")
		}
	})
	bad := map[string][]revision.File{
		`path "../x": must not contain '..'`:                files("../x", ""),
		`path "..x": must not start with '..'`:              files("..x", ""),
		`path "/x": want a clean relative path`:             files("/x", ""),
		`path "a//b": want a clean relative path`:           files("a//b", ""),
		`path "": want a clean relative path`:               files("", ""),
		`path "a": given twice`:                             files("a", "", "a", ""),
		`path "a/b": "a" is a file, not a directory`:        files("a", "", "a/b", ""),
		`path "x/../y": want a clean relative path such as`: files("x/../y", ""),
	}
	for want, fs := range bad {
		t.Run(want, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "app")
			d := open(t, dir)
			err := d.Write(fs, "x")
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Write = %v, want %q", err, want)
			}
			check(t, dir) // nothing written
		})
	}
}

// TestOpenRepairs sets up what a writer killed at each step leaves behind,
// and checks what Open makes of it.
func TestOpenRepairs(t *testing.T) {
	setup := func(t *testing.T) (string, *Dir) {
		dir := filepath.Join(t.TempDir(), "app")
		d := open(t, dir)
		write(t, d, "v1", files("a", "1", "b", "1"))
		return dir, d
	}
	v1 := []string{"..data -> <v1>", "<v1>/ -rwxr-xr-x", "<v1>/..hotreload -rw-r--r-- \"v1\"",
		`<v1>/a -rw-r--r-- "1"`, `<v1>/b -rw-r--r-- "1"`, "a -> ..data/a", "b -> ..data/b"}

	t.Run("half-written version", func(t *testing.T) {
		dir, _ := setup(t)
		half := filepath.Join(dir, "..2026_01_01_00_00_00.123")
		if err := os.MkdirAll(half, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(half), filepath.Join(dir, dataTmp)); err != nil {
			t.Fatal(err)
		}
		d := open(t, dir)
		check(t, dir, v1...)
		if got := d.Cleaned(); !slices.Equal(got, []string{dataTmp, filepath.Base(half)}) {
			t.Errorf("cleaned %v", got)
		}
	})
	t.Run("killed after the swap", func(t *testing.T) {
		dir, d := setup(t)
		write(t, d, "v2", files("a", "2", "c", "2"))
		// Before the new link and the removal of the vanished one.
		if err := os.Remove(filepath.Join(dir, "c")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..data/b", filepath.Join(dir, "b")); err != nil {
			t.Fatal(err)
		}
		open(t, dir)
		check(t, dir,
			"..data -> <v2>", "..last_good -> <v1>",
			"<v1>/ -rwxr-xr-x", "<v1>/..hotreload -rw-r--r-- \"v1\"", `<v1>/a -rw-r--r-- "1"`, `<v1>/b -rw-r--r-- "1"`,
			"<v2>/ -rwxr-xr-x", "<v2>/..hotreload -rw-r--r-- \"v2\"", `<v2>/a -rw-r--r-- "2"`, `<v2>/c -rw-r--r-- "2"`,
			"a -> ..data/a", "c -> ..data/c")
	})
	t.Run("killed in a restore, after the swap", func(t *testing.T) {
		dir, d := setup(t)
		write(t, d, "v2", files("a", "2"))
		good, _ := d.LastGood()
		if err := os.Symlink(good.Name, filepath.Join(dir, dataTmp)); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, dataTmp), filepath.Join(dir, dataLink)); err != nil {
			t.Fatal(err)
		}
		open(t, dir) // ..last_good names the current version: dropped; v2 is unnamed: removed
		check(t, dir, v1...)
	})
	t.Run("killed in a commit", func(t *testing.T) {
		dir, d := setup(t)
		write(t, d, "v2", files("a", "2", "b", "2"))
		if err := os.Remove(filepath.Join(dir, goodLink)); err != nil {
			t.Fatal(err)
		}
		open(t, dir)
		check(t, dir, "..data -> <v2>", "<v2>/ -rwxr-xr-x", "<v2>/..hotreload -rw-r--r-- \"v2\"",
			`<v2>/a -rw-r--r-- "2"`, `<v2>/b -rw-r--r-- "2"`, "a -> ..data/a", "b -> ..data/b")
	})
	t.Run("dangling data link", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "app")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, dataLink)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("..data/a", filepath.Join(dir, "a")); err != nil {
			t.Fatal(err)
		}
		open(t, dir)
		check(t, dir)
	})
}
