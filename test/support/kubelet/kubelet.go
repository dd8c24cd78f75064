// Package kubelet plays the kubelet: it writes a volume's directory the way
// the kubelet's AtomicWriter writes ConfigMap, Secret, downwardAPI and
// projected volumes, step by step, so that tests, benchmarks and the demo can
// drive hotreload exactly as a cluster would, without one.
//
// The layout it produces:
//
//	dir/
//	  ..2026_11_22_09_03_34.3394099091/   the current version (mode 0755)
//	      app.properties
//	      conf.d/default.conf
//	  ..data -> ..2026_11_22_09_03_34.3394099091
//	  app.properties -> ..data/app.properties
//	  conf.d -> ..data/conf.d
package kubelet

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

const (
	// dataDirName is the symlink that points at the current version directory.
	dataDirName = "..data"
	// newDataDirName is the temporary symlink renamed over dataDirName.
	newDataDirName = "..data_tmp"

	maxPathLength     = 4096
	maxFileNameLength = 255
	defaultMode       = 0o644
	versionDirPrefix  = "..2006_01_02_15_04_05."
)

// File is one item of a volume's payload.
type File struct {
	Data []byte
	Mode os.FileMode // permission bits; 0 means 0644
}

// Volume writes a volume's directory the way the kubelet's AtomicWriter
// does. It keeps no state of its own besides Dir: every Write reads the
// current version from disk, so several Volumes (or a restarted program) may
// take turns on the same directory. Methods are safe for concurrent use on
// one Volume.
type Volume struct {
	Dir string // the volume's root, as mounted into the container

	// AfterSwap, if set, is called by Write right after the rename of
	// ..data (step 7) and before the visible links of new keys are created
	// (step 8), with the Volume's lock held: a test can look at the volume
	// while the app already sees the new ..data but not yet its new keys.
	AfterSwap func()

	mu sync.Mutex
}

// New returns a Volume that writes into dir. Nothing is written until the
// first Write.
func New(dir string) *Volume {
	return &Volume{Dir: dir}
}

// Write projects payload into the volume. Keys are relative item paths such
// as "app.properties" or "conf.d/default.conf". It follows the kubelet's steps:
//
//  1. validate the item paths;
//  2. readlink ..data to find the current version directory;
//  3. if no item's content changed and no item vanished, write nothing at
//     all and return changed=false (an identical update makes no filesystem
//     event);
//  4. mkdir ..YYYY_MM_DD_HH_MM_SS.<random>, chmod 0755;
//  5. write every item into it in random order, creating nested directories;
//  6. symlink the new directory's name to ..data_tmp;
//  7. rename ..data_tmp to ..data (the one atomic step), then call
//     AfterSwap if it is set;
//  8. create visible symlinks key -> ..data/key for new top-level keys
//     (first path element only);
//  9. unlink visible symlinks of top-level keys that vanished;
//  10. remove the old version directory.
//
// The first Write creates the directory and always writes. Item modes are
// not compared (the kubelet compares bytes only).
func (v *Volume) Write(payload map[string]File) (changed bool, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()

	items, err := cleanPayload(payload)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(v.Dir, 0o755); err != nil {
		return false, fmt.Errorf("create volume dir: %w", err)
	}

	dataPath := filepath.Join(v.Dir, dataDirName)
	oldVersion, err := os.Readlink(dataPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("read %s: %w", dataDirName, err)
	}
	var oldDir string
	if oldVersion != "" {
		oldDir = filepath.Join(v.Dir, oldVersion)
	}

	if oldDir != "" {
		differs, err := contentDiffers(oldDir, items)
		if err != nil {
			return false, err
		}
		vanished, err := vanishedPaths(oldDir, items)
		if err != nil {
			return false, err
		}
		if !differs && len(vanished) == 0 {
			return false, nil
		}
		return true, v.project(items, oldDir, vanished)
	}
	return true, v.project(items, "", nil)
}

// project performs steps 4 to 10 of Write.
func (v *Volume) project(items map[string]File, oldDir string, vanished []string) error {
	newDir, err := os.MkdirTemp(v.Dir, time.Now().Format(versionDirPrefix))
	if err != nil {
		return fmt.Errorf("create version dir: %w", err)
	}
	if err := os.Chmod(newDir, 0o755); err != nil {
		return fmt.Errorf("chmod version dir: %w", err)
	}

	keys := make([]string, 0, len(items))
	for k := range items {
		keys = append(keys, k)
	}
	rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	for _, k := range keys {
		if err := writeItem(newDir, k, items[k]); err != nil {
			return err
		}
	}

	tmpLink := filepath.Join(v.Dir, newDataDirName)
	if err := os.Remove(tmpLink); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", newDataDirName, err)
	}
	if err := os.Symlink(filepath.Base(newDir), tmpLink); err != nil {
		return fmt.Errorf("link %s: %w", newDataDirName, err)
	}
	if err := os.Rename(tmpLink, filepath.Join(v.Dir, dataDirName)); err != nil {
		return fmt.Errorf("swap %s: %w", dataDirName, err)
	}
	if v.AfterSwap != nil {
		v.AfterSwap()
	}

	for _, top := range topLevel(keys) {
		visible := filepath.Join(v.Dir, top)
		if _, err := os.Lstat(visible); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("check visible link: %w", err)
		}
		if err := os.Symlink(path.Join(dataDirName, top), visible); err != nil {
			return fmt.Errorf("create visible link: %w", err)
		}
	}

	for _, p := range vanished {
		if strings.Contains(p, "/") {
			continue // only the first path element has a visible link
		}
		if err := os.Remove(filepath.Join(v.Dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove visible link: %w", err)
		}
	}

	if oldDir != "" {
		if err := os.RemoveAll(oldDir); err != nil {
			return fmt.Errorf("remove old version dir: %w", err)
		}
	}
	return nil
}

// Chmod simulates the ownership and mode changes that the kubelet applies
// when a pod sets fsGroup: every file of the current version flips its
// group-read bit and every directory of the volume is chmod'ed to its own
// mode. A watcher sees ATTRIB (fsnotify Chmod) events; no content changes.
func (v *Volume) Chmod() error {
	v.mu.Lock()
	defer v.mu.Unlock()

	version, err := os.Readlink(filepath.Join(v.Dir, dataDirName))
	if err != nil {
		return fmt.Errorf("read %s: %w", dataDirName, err)
	}
	if err := chmodSame(v.Dir); err != nil {
		return err
	}
	return filepath.WalkDir(filepath.Join(v.Dir, version), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return chmodSame(p)
		}
		info, err := d.Info()
		if err != nil {
			return fmt.Errorf("stat item: %w", err)
		}
		if err := os.Chmod(p, info.Mode().Perm()^0o040); err != nil {
			return fmt.Errorf("chmod item: %w", err)
		}
		return nil
	})
}

func chmodSame(dir string) error {
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat dir: %w", err)
	}
	if err := os.Chmod(dir, info.Mode().Perm()); err != nil {
		return fmt.Errorf("chmod dir: %w", err)
	}
	return nil
}

// validatePath reports whether p is acceptable as an item path: not empty,
// relative, no ".." element, not starting with "..", at most 4096 bytes with
// elements of at most 255 bytes.
func validatePath(p string) error {
	if p == "" {
		return errors.New("invalid path: must not be empty")
	}
	if path.IsAbs(p) {
		return fmt.Errorf("invalid path %q: must be relative", p)
	}
	if len(p) > maxPathLength {
		return fmt.Errorf("invalid path %q: longer than %d bytes", p, maxPathLength)
	}
	elems := strings.Split(p, "/")
	for _, e := range elems {
		if e == ".." {
			return fmt.Errorf("invalid path %q: must not contain '..'", p)
		}
		if len(e) > maxFileNameLength {
			return fmt.Errorf("invalid path %q: element longer than %d bytes", p, maxFileNameLength)
		}
	}
	if strings.HasPrefix(elems[0], "..") {
		return fmt.Errorf("invalid path %q: must not start with '..'", p)
	}
	return nil
}

// cleanPayload validates every key and returns the payload keyed by clean
// paths, with modes defaulted.
func cleanPayload(payload map[string]File) (map[string]File, error) {
	items := make(map[string]File, len(payload))
	for k, f := range payload {
		if err := validatePath(k); err != nil {
			return nil, err
		}
		c := path.Clean(k)
		if c == "." {
			return nil, fmt.Errorf("invalid path %q: must name a file", k)
		}
		if _, dup := items[c]; dup {
			return nil, fmt.Errorf("invalid path %q: duplicates another item", k)
		}
		if f.Mode == 0 {
			f.Mode = defaultMode
		}
		items[c] = f
	}
	for k := range items {
		for d := path.Dir(k); d != "."; d = path.Dir(d) {
			if _, clash := items[d]; clash {
				return nil, fmt.Errorf("invalid path %q: %q is an item, not a directory", k, d)
			}
		}
	}
	return items, nil
}

// contentDiffers reports whether any item's bytes differ from the file of
// the same path in the old version directory (or that file is missing).
func contentDiffers(oldDir string, items map[string]File) (bool, error) {
	for k, f := range items {
		old, err := os.ReadFile(filepath.Join(oldDir, filepath.FromSlash(k)))
		if errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("read old item: %w", err)
		}
		if !bytes.Equal(old, f.Data) {
			return true, nil
		}
	}
	return false, nil
}

// vanishedPaths lists the paths (files and directories, relative, slash
// separated) of the old version directory that the new payload no longer has.
func vanishedPaths(oldDir string, items map[string]File) ([]string, error) {
	keep := make(map[string]bool)
	for k := range items {
		for p := k; p != "."; p = path.Dir(p) {
			keep[p] = true
		}
	}
	var gone []string
	err := filepath.WalkDir(oldDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(oldDir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != "." && !keep[rel] {
			gone = append(gone, rel)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list old version: %w", err)
	}
	return gone, nil
}

func writeItem(dir, key string, f File) error {
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("create item dir: %w", err)
	}
	if err := os.WriteFile(p, f.Data, f.Mode); err != nil {
		return fmt.Errorf("write item: %w", err)
	}
	if err := os.Chmod(p, f.Mode); err != nil { // WriteFile's mode is subject to umask
		return fmt.Errorf("chmod item: %w", err)
	}
	return nil
}

// topLevel returns the distinct first path elements of keys.
func topLevel(keys []string) []string {
	seen := make(map[string]bool)
	var tops []string
	for _, k := range keys {
		top, _, _ := strings.Cut(k, "/")
		if !seen[top] {
			seen[top] = true
			tops = append(tops, top)
		}
	}
	return tops
}
