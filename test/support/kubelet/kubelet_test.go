package kubelet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

var versionDirRE = regexp.MustCompile(`^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$`)

// visible returns the names in dir that do not start with "..", sorted.
func visible(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "..") {
			names = append(names, e.Name())
		}
	}
	return names
}

// versionDirs returns the "..<timestamp>" directories in dir.
func versionDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if versionDirRE.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// checkLayout verifies the kubelet layout of dir against the expected items.
func checkLayout(t *testing.T, dir string, want map[string]File) {
	t.Helper()
	target, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatalf("readlink ..data: %v", err)
	}
	if !versionDirRE.MatchString(target) {
		t.Errorf("..data -> %q, want a ..YYYY_MM_DD_HH_MM_SS.<random> name", target)
	}
	if got := versionDirs(t, dir); !slices.Equal(got, []string{target}) {
		t.Errorf("version dirs = %q, want only %q", got, target)
	}
	info, err := os.Stat(filepath.Join(dir, target))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o755 {
		t.Errorf("version dir mode = %v, want 0755", info.Mode().Perm())
	}
	if _, err := os.Lstat(filepath.Join(dir, "..data_tmp")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("..data_tmp left behind: %v", err)
	}

	var tops []string
	for k := range want {
		top, _, _ := strings.Cut(k, "/")
		if !slices.Contains(tops, top) {
			tops = append(tops, top)
		}
	}
	slices.Sort(tops)
	if got := visible(t, dir); !slices.Equal(got, tops) {
		t.Errorf("visible entries = %q, want %q", got, tops)
	}
	for _, top := range tops {
		link, err := os.Readlink(filepath.Join(dir, top))
		if err != nil {
			t.Errorf("visible %s is not a symlink: %v", top, err)
			continue
		}
		if link != "..data/"+top {
			t.Errorf("visible %s -> %q, want ..data/%s", top, link, top)
		}
	}
	for k, f := range want {
		p := filepath.Join(dir, filepath.FromSlash(k))
		data, err := os.ReadFile(p)
		if err != nil {
			t.Errorf("read %s through the visible path: %v", k, err)
			continue
		}
		if string(data) != string(f.Data) {
			t.Errorf("%s = %q, want %q", k, data, f.Data)
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != mode {
			t.Errorf("%s mode = %v, want %v", k, info.Mode().Perm(), mode)
		}
	}
}

func TestWrite(t *testing.T) {
	v1 := map[string]File{
		"app.properties":      {Data: []byte("color=blue\n")},
		"conf.d/default.conf": {Data: []byte("listen 80;\n")},
		"conf.d/extra.conf":   {Data: []byte("gzip on;\n")},
		"secret.key":          {Data: []byte("s3cr3t"), Mode: 0o400},
	}
	tests := []struct {
		name        string
		next        map[string]File
		wantChanged bool
	}{
		{
			name:        "identical rewrite writes nothing",
			next:        v1,
			wantChanged: false,
		},
		{
			name: "mode change alone writes nothing",
			next: map[string]File{
				"app.properties":      {Data: []byte("color=blue\n"), Mode: 0o600},
				"conf.d/default.conf": {Data: []byte("listen 80;\n")},
				"conf.d/extra.conf":   {Data: []byte("gzip on;\n")},
				"secret.key":          {Data: []byte("s3cr3t"), Mode: 0o400},
			},
			wantChanged: false,
		},
		{
			name: "content change",
			next: map[string]File{
				"app.properties":      {Data: []byte("color=green\n")},
				"conf.d/default.conf": {Data: []byte("listen 80;\n")},
				"conf.d/extra.conf":   {Data: []byte("gzip on;\n")},
				"secret.key":          {Data: []byte("s3cr3t"), Mode: 0o400},
			},
			wantChanged: true,
		},
		{
			name: "nested content change",
			next: map[string]File{
				"app.properties":      {Data: []byte("color=blue\n")},
				"conf.d/default.conf": {Data: []byte("listen 8080;\n")},
				"conf.d/extra.conf":   {Data: []byte("gzip on;\n")},
				"secret.key":          {Data: []byte("s3cr3t"), Mode: 0o400},
			},
			wantChanged: true,
		},
		{
			name: "new top-level and nested keys",
			next: map[string]File{
				"app.properties":      {Data: []byte("color=blue\n")},
				"conf.d/default.conf": {Data: []byte("listen 80;\n")},
				"conf.d/extra.conf":   {Data: []byte("gzip on;\n")},
				"secret.key":          {Data: []byte("s3cr3t"), Mode: 0o400},
				"new.txt":             {Data: []byte("new")},
				"a/b/c/deep.txt":      {Data: []byte("deep")},
			},
			wantChanged: true,
		},
		{
			name: "vanished top-level key",
			next: map[string]File{
				"app.properties":      {Data: []byte("color=blue\n")},
				"conf.d/default.conf": {Data: []byte("listen 80;\n")},
				"conf.d/extra.conf":   {Data: []byte("gzip on;\n")},
			},
			wantChanged: true,
		},
		{
			name: "vanished nested key",
			next: map[string]File{
				"app.properties":      {Data: []byte("color=blue\n")},
				"conf.d/default.conf": {Data: []byte("listen 80;\n")},
				"secret.key":          {Data: []byte("s3cr3t"), Mode: 0o400},
			},
			wantChanged: true,
		},
		{
			name: "vanished nested directory",
			next: map[string]File{
				"app.properties": {Data: []byte("color=blue\n")},
				"secret.key":     {Data: []byte("s3cr3t"), Mode: 0o400},
			},
			wantChanged: true,
		},
		{
			name:        "empty payload",
			next:        map[string]File{},
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "config")
			v := New(dir)
			changed, err := v.Write(v1)
			if err != nil {
				t.Fatalf("first write: %v", err)
			}
			if !changed {
				t.Fatal("first write reported no change")
			}
			checkLayout(t, dir, v1)
			before, err := os.Readlink(filepath.Join(dir, "..data"))
			if err != nil {
				t.Fatal(err)
			}

			changed, err = v.Write(tt.next)
			if err != nil {
				t.Fatalf("second write: %v", err)
			}
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			after, err := os.Readlink(filepath.Join(dir, "..data"))
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantChanged {
				if after == before {
					t.Errorf("..data still points at %s after a change", before)
				}
				checkLayout(t, dir, tt.next)
			} else {
				if after != before {
					t.Errorf("..data moved from %s to %s without a change", before, after)
				}
				checkLayout(t, dir, v1)
			}
		})
	}
}

func TestWriteInvalidPaths(t *testing.T) {
	tests := []struct {
		name    string
		payload map[string]File
	}{
		{"empty key", map[string]File{"": {}}},
		{"absolute", map[string]File{"/etc/passwd": {}}},
		{"dot-dot element", map[string]File{"a/../../b": {}}},
		{"leading dot-dot", map[string]File{"../b": {}}},
		{"starts with dot-dot", map[string]File{"..data": {}}},
		{"starts with dot-dot name", map[string]File{"..hidden/x": {}}},
		{"dot only", map[string]File{".": {}}},
		{"element too long", map[string]File{strings.Repeat("x", 256): {}}},
		{"path too long", map[string]File{strings.Repeat("abcdefgh/", 456) + "x": {}}},
		{"file and directory", map[string]File{"a": {}, "a/b": {}}},
		{"duplicate after cleaning", map[string]File{"a/b": {}, "a//b": {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "config")
			changed, err := New(dir).Write(tt.payload)
			if err == nil {
				t.Fatal("Write accepted an invalid payload")
			}
			if changed {
				t.Error("changed = true on error")
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("volume dir was created for an invalid payload: %v", err)
			}
		})
	}
}

// recorder collects fsnotify events on a volume and on a marker directory.
// inotify delivers the events of one instance in order, so once the marker's
// event has arrived every event caused before it has arrived too.
type recorder struct {
	w      *fsnotify.Watcher
	marker string
}

func newRecorder(t *testing.T, dirs ...string) *recorder {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r := &recorder{w: w, marker: t.TempDir()}
	for _, d := range append(dirs, r.marker) {
		if err := w.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// events returns every event received up to the marker, which it writes.
func (r *recorder) events(t *testing.T) []fsnotify.Event {
	t.Helper()
	markerFile := filepath.Join(r.marker, "marker")
	if err := os.WriteFile(markerFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var got []fsnotify.Event
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-r.w.Events:
			if ev.Name == markerFile {
				return got
			}
			got = append(got, ev)
		case err := <-r.w.Errors:
			t.Fatalf("watch error: %v", err)
		case <-deadline:
			t.Fatal("marker event did not arrive within 5s")
		}
	}
}

func TestWriteEvents(t *testing.T) {
	v1 := map[string]File{
		"app.properties":      {Data: []byte("color=blue\n")},
		"conf.d/default.conf": {Data: []byte("listen 80;\n")},
	}
	v2 := map[string]File{
		"app.properties":      {Data: []byte("color=green\n")},
		"conf.d/default.conf": {Data: []byte("listen 80;\n")},
	}

	t.Run("identical rewrite makes no event", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "config")
		v := New(dir)
		if _, err := v.Write(v1); err != nil {
			t.Fatal(err)
		}
		version, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		r := newRecorder(t, dir, filepath.Join(dir, version), filepath.Join(dir, version, "conf.d"))
		changed, err := v.Write(v1)
		if err != nil {
			t.Fatal(err)
		}
		if changed {
			t.Error("identical rewrite reported a change")
		}
		if evs := r.events(t); len(evs) != 0 {
			t.Errorf("identical rewrite made %d events: %v", len(evs), evs)
		}
	})

	t.Run("update swaps ..data on the root", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "config")
		v := New(dir)
		if _, err := v.Write(v1); err != nil {
			t.Fatal(err)
		}
		old, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		r := newRecorder(t, dir)
		if _, err := v.Write(v2); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, ev := range r.events(t) {
			seen = append(seen, ev.Op.String()+" "+filepath.Base(ev.Name))
		}
		// The order of the essential steps on the root, per kubelet-volumes.md.
		want := []string{
			"CREATE ..data_tmp",
			"RENAME ..data_tmp",
			"CREATE ..data",
			"REMOVE " + old,
		}
		i := 0
		for _, s := range seen {
			if i < len(want) && s == want[i] {
				i++
			}
		}
		if i != len(want) {
			t.Errorf("events on the root = %q, want %q in this order", seen, want)
		}
		for _, s := range seen {
			if strings.HasSuffix(s, " app.properties") || strings.HasSuffix(s, " conf.d") {
				t.Errorf("unexpected event for a key whose link is untouched: %s", s)
			}
		}
	})

	t.Run("chmod makes attribute events only", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "config")
		v := New(dir)
		if _, err := v.Write(v1); err != nil {
			t.Fatal(err)
		}
		version, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		r := newRecorder(t, dir, filepath.Join(dir, version))
		if err := v.Chmod(); err != nil {
			t.Fatal(err)
		}
		evs := r.events(t)
		if len(evs) == 0 {
			t.Fatal("chmod made no event")
		}
		for _, ev := range evs {
			if ev.Op != fsnotify.Chmod {
				t.Errorf("chmod made a %v event for %s", ev.Op, ev.Name)
			}
		}
		checkLayout(t, dir, map[string]File{
			"app.properties":      {Data: v1["app.properties"].Data, Mode: 0o604},
			"conf.d/default.conf": {Data: v1["conf.d/default.conf"].Data, Mode: 0o604},
		})
	})
}

func TestChmodWithoutData(t *testing.T) {
	if err := New(t.TempDir()).Chmod(); err == nil {
		t.Error("Chmod on a volume never written returned no error")
	}
}

// TestAfterSwap checks that the hook runs between the rename of ..data and
// the visible links: ..data names the new version, whose new key has no
// visible link yet, and the vanished key's link and the old version are
// still there.
func TestAfterSwap(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	v := New(dir)
	if _, err := v.Write(map[string]File{"old": {Data: []byte("1")}, "kept": {Data: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	before, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	v.AfterSwap = func() {
		calls++
		now, err := os.Readlink(filepath.Join(dir, "..data"))
		if err != nil {
			t.Fatal(err)
		}
		if now == before {
			t.Error("..data not swapped yet")
		}
		if got, want := visible(t, dir), []string{"kept", "old"}; !slices.Equal(got, want) {
			t.Errorf("visible entries = %v, want %v: no link made or removed yet", got, want)
		}
		if _, err := os.Stat(filepath.Join(dir, now, "new")); err != nil {
			t.Errorf("the new version lacks its new item: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, before)); err != nil {
			t.Errorf("the old version is gone already: %v", err)
		}
	}
	want := map[string]File{"kept": {Data: []byte("2")}, "new": {Data: []byte("2")}}
	if _, err := v.Write(want); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("AfterSwap called %d times, want 1", calls)
	}
	checkLayout(t, dir, want)
	if _, err := v.Write(want); err != nil { // identical: no swap, no call
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("AfterSwap called for an identical write")
	}
}
