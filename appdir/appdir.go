// Package appdir writes the app's directory: the directory (an emptyDir)
// that an app reads its configuration from when hotreload chooses which
// revision it runs. The directory is laid out exactly as the kubelet lays
// out a ConfigMap or Secret volume, so an app, and any watcher, sees what it
// would see on the volume itself:
//
//	/etc/app/
//	  ..2026_11_25_10_00_00.3394099091/   the current version
//	      app.yaml
//	      ..hotreload                     the version's label (hidden)
//	  ..data -> ..2026_11_25_10_00_00.3394099091
//	  app.yaml -> ..data/app.yaml         one visible link per top-level entry
//
// A write follows the kubelet's steps: a new version directory, written in
// full; ..data_tmp linked to it and renamed over ..data (the one atomic
// step: before it the app sees the old version in full, after it the new
// one); visible links of new entries created after the swap; links of
// vanished entries removed; the old version removed last.
//
// Last-known-good: after a write, the version it replaced is kept (named by
// the hidden link ..last_good) until Commit says the app took the new one,
// and Restore puts it back, with the same steps, if the app refused it. A
// write made before the last one was committed keeps the older good version
// and drops the unconfirmed one.
//
// Crash safety: at every step ..data names a version written in full, and
// ..last_good a version that worked. A writer killed mid-write leaves the
// old version or the new one readable; Open, at the next start, removes a
// half-written version, a stale ..data_tmp, and links that the crash left
// out of step. Nothing is fsynced: a killed process loses nothing the
// kernel has, as for the kubelet, which does not fsync either.
package appdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hotreload/hotreload/internal/revision"
)

// Names in the directory. Every name hotreload keeps for itself starts
// with "..", as the kubelet's do: apps and watchers skip them.
const (
	dataLink    = "..data"
	dataTmp     = "..data_tmp"
	goodLink    = "..last_good"
	goodTmp     = "..last_good_tmp"
	labelFile   = "..hotreload"
	versionName = "..2006_01_02_15_04_05." // the kubelet's, with random digits after it
	defaultMode = 0o644
)

// ErrNoLastGood is returned by Restore when no previous version is kept.
var ErrNoLastGood = errors.New("no last-known-good version kept")

// Version is one version directory.
type Version struct {
	Name  string // such as ..2026_11_25_10_00_00.3394099091
	Label string // what Write was given with it
}

// Dir is an app's directory. Its methods are safe for concurrent use; one
// Dir, and one process, should write a directory.
type Dir struct {
	path string
	mu   sync.Mutex
	// cleaned lists what Open removed or repaired.
	cleaned []string
}

// Open makes path (if missing) and returns its Dir, after undoing what a
// writer killed mid-write left behind: a version directory that neither
// ..data nor ..last_good names, ..data_tmp, ..last_good_tmp, a ..last_good
// that names the current version or nothing, a ..data that names nothing,
// missing visible links and links of entries the current version lacks.
//
// A directory with a visible entry that is not a link into ..data (a file,
// a directory, another link) is refused: it is not one that only hotreload
// writes, and an entry of the app's would hide hotreload's.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		return nil, fmt.Errorf("make the app's directory: %w", err)
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("open the app's directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", path)
	}
	d := &Dir{path: path}
	if err := d.recover(); err != nil {
		return nil, err
	}
	return d, nil
}

// Path is the directory's path.
func (d *Dir) Path() string { return d.path }

// Cleaned lists what Open removed or repaired, for a log line; empty after
// a clean stop.
func (d *Dir) Cleaned() []string { return d.cleaned }

func (d *Dir) recover() error {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("open the app's directory: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); !hidden(name) && !d.isOurLink(name) {
			return fmt.Errorf("%s holds %s, which hotreload did not write: give an empty directory (an emptyDir) that only hotreload writes", d.path, name)
		}
	}
	for _, tmp := range []string{dataTmp, goodTmp} {
		if err := os.Remove(d.join(tmp)); err == nil {
			d.cleaned = append(d.cleaned, tmp)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", tmp, err)
		}
	}
	cur := d.link(dataLink)
	if cur != "" && !d.isVersion(cur) {
		if err := os.Remove(d.join(dataLink)); err != nil {
			return fmt.Errorf("remove %s: %w", dataLink, err)
		}
		d.cleaned = append(d.cleaned, dataLink+" (named no version)")
		cur = ""
	}
	good := d.link(goodLink)
	if good != "" && (good == cur || !d.isVersion(good)) {
		if err := os.Remove(d.join(goodLink)); err != nil {
			return fmt.Errorf("remove %s: %w", goodLink, err)
		}
		d.cleaned = append(d.cleaned, goodLink)
		good = ""
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() && isVersionName(name) && name != cur && name != good {
			if err := os.RemoveAll(d.join(name)); err != nil {
				return fmt.Errorf("remove %s: %w", name, err)
			}
			d.cleaned = append(d.cleaned, name)
		}
	}
	if cur == "" {
		return d.syncLinks(nil, &d.cleaned)
	}
	tops, err := d.tops(cur)
	if err != nil {
		return err
	}
	return d.syncLinks(tops, &d.cleaned)
}

// Current returns the version that ..data names, if any.
func (d *Dir) Current() (Version, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version(d.link(dataLink))
}

// LastGood returns the version kept for Restore, if any: the one that ran
// before the current one was written and has not been committed since.
func (d *Dir) LastGood() (Version, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.version(d.link(goodLink))
}

// Files reads the current version's files, as revision.ReadVolume does.
// An empty directory has none.
func (d *Dir) Files() ([]revision.File, error) {
	v, err := revision.ReadVolume(d.path)
	return v.Files, err
}

// Write publishes files as the new current version, with label. The
// version it replaces is kept as last-known-good unless one is kept
// already (the replaced version was never committed, and is removed).
// Paths are relative and slash separated; no element may be "..", and the
// first may not start with ".." (the kubelet's rule). A Mode of 0 is 0644.
func (d *Dir) Write(files []revision.File, label string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	tops, err := checkPaths(files)
	if err != nil {
		return err
	}
	for _, top := range tops {
		if _, err := os.Lstat(d.join(top)); err == nil && !d.isOurLink(top) {
			return fmt.Errorf("write %s: %s exists and is not hotreload's link: the app's directory must be one that only hotreload writes", d.path, top)
		}
	}
	cur, good := d.link(dataLink), d.link(goodLink)

	dir, err := os.MkdirTemp(d.path, time.Now().UTC().Format(versionName))
	if err != nil {
		return fmt.Errorf("make a version directory: %w", err)
	}
	name := filepath.Base(dir)
	if err := writeVersion(dir, files, label); err != nil {
		os.RemoveAll(dir)
		return err
	}
	if good == "" && cur != "" {
		// The running version becomes the one to go back to.
		if err := d.relink(goodLink, goodTmp, cur); err != nil {
			os.RemoveAll(dir)
			return err
		}
		good = cur
	}
	if err := d.relink(dataLink, dataTmp, name); err != nil {
		os.RemoveAll(dir)
		return err
	}
	if err := d.syncLinks(tops, nil); err != nil {
		return err
	}
	if cur != "" && cur != good {
		if err := os.RemoveAll(d.join(cur)); err != nil {
			return fmt.Errorf("remove the replaced version %s: %w", cur, err)
		}
	}
	return nil
}

// Restore puts the last-known-good version back, as a write would (swap,
// links, then the refused version is removed), and returns it. With no
// last-known-good version kept it returns ErrNoLastGood.
func (d *Dir) Restore() (Version, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	good, cur := d.link(goodLink), d.link(dataLink)
	v, ok := d.version(good)
	if !ok {
		return Version{}, ErrNoLastGood
	}
	tops, err := d.tops(good)
	if err != nil {
		return Version{}, err
	}
	if err := d.relink(dataLink, dataTmp, good); err != nil {
		return Version{}, err
	}
	if err := d.syncLinks(tops, nil); err != nil {
		return Version{}, err
	}
	if err := os.Remove(d.join(goodLink)); err != nil {
		return Version{}, fmt.Errorf("remove %s: %w", goodLink, err)
	}
	if cur != "" && cur != good {
		if err := os.RemoveAll(d.join(cur)); err != nil {
			return Version{}, fmt.Errorf("remove the refused version %s: %w", cur, err)
		}
	}
	return v, nil
}

// Commit records that the app took the current version: the
// last-known-good version is no longer needed and is removed.
func (d *Dir) Commit() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	good := d.link(goodLink)
	if good == "" {
		return nil
	}
	// The link goes first: a crash after it leaves an unnamed version,
	// which Open removes, never a ..last_good naming nothing.
	if err := os.Remove(d.join(goodLink)); err != nil {
		return fmt.Errorf("remove %s: %w", goodLink, err)
	}
	if good != d.link(dataLink) {
		if err := os.RemoveAll(d.join(good)); err != nil {
			return fmt.Errorf("remove the last-known-good version %s: %w", good, err)
		}
	}
	return nil
}

func (d *Dir) join(name string) string { return filepath.Join(d.path, name) }

// link returns the target of the link name in the directory, or "".
func (d *Dir) link(name string) string {
	t, err := os.Readlink(d.join(name))
	if err != nil {
		return ""
	}
	return t
}

// isVersion reports whether name is a version directory of d.
func (d *Dir) isVersion(name string) bool {
	if !isVersionName(name) {
		return false
	}
	info, err := os.Lstat(d.join(name))
	return err == nil && info.IsDir()
}

func (d *Dir) version(name string) (Version, bool) {
	if name == "" || !d.isVersion(name) {
		return Version{}, false
	}
	b, _ := os.ReadFile(filepath.Join(d.join(name), labelFile))
	return Version{Name: name, Label: string(b)}, true
}

// isOurLink reports whether the visible entry name is a link into ..data
// of the same name, as Write makes them.
func (d *Dir) isOurLink(name string) bool {
	return d.link(name) == path.Join(dataLink, name)
}

// relink points the link name at target atomically: tmp, then a rename.
func (d *Dir) relink(name, tmp, target string) error {
	if err := os.Remove(d.join(tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", tmp, err)
	}
	if err := os.Symlink(target, d.join(tmp)); err != nil {
		return fmt.Errorf("link %s: %w", tmp, err)
	}
	if err := os.Rename(d.join(tmp), d.join(name)); err != nil {
		return fmt.Errorf("swap %s: %w", name, err)
	}
	return nil
}

// tops returns the visible top-level entries of version.
func (d *Dir) tops(version string) ([]string, error) {
	entries, err := os.ReadDir(d.join(version))
	if err != nil {
		return nil, fmt.Errorf("list version %s: %w", version, err)
	}
	var tops []string
	for _, e := range entries {
		if !hidden(e.Name()) {
			tops = append(tops, e.Name())
		}
	}
	return tops, nil
}

// syncLinks makes the visible links those of tops: missing ones are
// created, then those of entries not in tops are removed. Only links into
// ..data are touched. Each change is added to changed, if not nil.
func (d *Dir) syncLinks(tops []string, changed *[]string) error {
	for _, top := range tops {
		if _, err := os.Lstat(d.join(top)); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check visible link %s: %w", top, err)
		}
		if err := os.Symlink(path.Join(dataLink, top), d.join(top)); err != nil {
			return fmt.Errorf("create visible link %s: %w", top, err)
		}
		if changed != nil {
			*changed = append(*changed, top+" (link created)")
		}
	}
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return fmt.Errorf("list the app's directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if hidden(name) || slices.Contains(tops, name) || !d.isOurLink(name) {
			continue
		}
		if err := os.Remove(d.join(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove visible link %s: %w", name, err)
		}
		if changed != nil {
			*changed = append(*changed, name+" (link removed)")
		}
	}
	return nil
}

// writeVersion writes files and the label into the new version dir.
func writeVersion(dir string, files []revision.File, label string) error {
	if err := os.Chmod(dir, 0o755); err != nil { // MkdirTemp makes it 0700
		return fmt.Errorf("chmod version directory: %w", err)
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("make directory of %s: %w", f.Path, err)
		}
		mode := f.Mode.Perm()
		if mode == 0 {
			mode = defaultMode
		}
		if err := os.WriteFile(p, f.Data, mode); err != nil {
			return fmt.Errorf("write %s: %w", f.Path, err)
		}
		if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is subject to umask
			return fmt.Errorf("chmod %s: %w", f.Path, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, labelFile), []byte(label), defaultMode); err != nil {
		return fmt.Errorf("write the version's label: %w", err)
	}
	return nil
}

// checkPaths checks the paths of files and returns their distinct first
// elements.
func checkPaths(files []revision.File) ([]string, error) {
	seen := make(map[string]bool, len(files))
	var tops []string
	for _, f := range files {
		p := f.Path
		if p == "" || path.IsAbs(p) || path.Clean(p) != p {
			return nil, fmt.Errorf("path %q: want a clean relative path such as conf.d/app.yaml", p)
		}
		elems := strings.Split(p, "/")
		for _, e := range elems {
			if e == ".." {
				return nil, fmt.Errorf("path %q: must not contain '..'", p)
			}
		}
		if hidden(elems[0]) {
			return nil, fmt.Errorf("path %q: must not start with '..'", p)
		}
		if seen[p] {
			return nil, fmt.Errorf("path %q: given twice", p)
		}
		seen[p] = true
		if !slices.Contains(tops, elems[0]) {
			tops = append(tops, elems[0])
		}
	}
	for p := range seen {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				return nil, fmt.Errorf("path %q: %q is a file, not a directory", p, dir)
			}
		}
	}
	return tops, nil
}

func hidden(name string) bool { return strings.HasPrefix(name, "..") }

// isVersionName reports whether name is a version directory's: any other
// hidden name than the links. Write names them as the kubelet does,
// ..YYYY_MM_DD_HH_MM_SS.<digits>, which watchers (hotreload's among them)
// recognise.
func isVersionName(name string) bool {
	switch name {
	case dataLink, dataTmp, goodLink, goodTmp, "..", ".":
		return false
	}
	return hidden(name)
}
