package revision

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Limits of ReadVolume. A ConfigMap or a Secret holds at most 1 MiB.
const (
	// MaxVolumeSize bounds the bytes read from one volume.
	MaxVolumeSize = 16 << 20
	// maxReadAttempts bounds how often a read starts again because the
	// kubelet swapped ..data while it was read.
	maxReadAttempts = 5
	// maxDepth bounds how deep directories nest.
	maxDepth = 32
)

// dataLink is the kubelet's symlink to the current version directory.
const dataLink = "..data"

// Volume is what a volume holds: its files and, apart, the reserved key.
type Volume struct {
	Files    []File // sorted by path, without ReservedKey
	Reserved []byte // the content of ReservedKey at the top level; nil if there is none
}

// Sum is the canonical sum of v's files.
func (v Volume) Sum() [32]byte { return Sum(v.Files) }

// ReadVolume reads the content of the volume at dir.
//
// A kubelet volume (one with ..data) is read from the version directory
// that ..data names, which the kubelet never changes once it is published:
// the read is one revision in full, never a mix of two, and equal to what
// the visible names show once the kubelet has finished an update. If ..data
// is swapped during the read, the read starts again. A plain directory is
// read through its visible names.
//
// Names starting with ".." are skipped at every level, symlinks are
// followed as an app would follow them (dangling ones and loops are
// skipped), and only regular files are content. A missing dir is an error
// that wraps fs.ErrNotExist.
func ReadVolume(dir string) (Volume, error) {
	for attempt := 1; ; attempt++ {
		link := filepath.Join(dir, dataLink)
		target, err := os.Readlink(link)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) {
			if _, err := os.Stat(dir); err != nil {
				return Volume{}, fmt.Errorf("read volume: %w", err)
			}
			return readTree(dir) // a plain directory
		}
		if err != nil {
			return Volume{}, fmt.Errorf("read volume: %w", err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		v, err := readTree(target)
		again, lerr := os.Readlink(link)
		if !filepath.IsAbs(again) {
			again = filepath.Join(dir, again)
		}
		switch {
		case err == nil && lerr == nil && again == target:
			return v, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return Volume{}, err
		case attempt == maxReadAttempts:
			return Volume{}, fmt.Errorf("read volume %s: %s swapped %d times while it was read", dir, dataLink, attempt)
		}
	}
}

// tree reads a directory tree as an app sees it.
type tree struct {
	v     Volume
	size  int64
	stack []fileKey // the directories being read, to skip loops
}

type fileKey struct{ dev, ino uint64 }

func readTree(root string) (Volume, error) {
	t := &tree{}
	if err := t.dir(root, ""); err != nil {
		return Volume{}, err
	}
	slices.SortFunc(t.v.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return t.v, nil
}

func (t *tree) dir(real, rel string) error {
	info, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("read volume: %w", err)
	}
	key := keyOf(info)
	for _, k := range t.stack {
		if k == key {
			return nil // a symlink loop: an app reading it would loop too
		}
	}
	if len(t.stack) == maxDepth {
		return fmt.Errorf("read volume: %s nests deeper than %d directories", real, maxDepth)
	}
	t.stack = append(t.stack, key)
	defer func() { t.stack = t.stack[:len(t.stack)-1] }()

	entries, err := os.ReadDir(real)
	if err != nil {
		return fmt.Errorf("read volume: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			continue
		}
		p, r := filepath.Join(real, name), path.Join(rel, name)
		info, err := os.Stat(p) // follows symlinks, as the app does
		switch {
		case errors.Is(err, fs.ErrNotExist) && e.Type()&fs.ModeSymlink != 0:
			continue // dangling: the app sees nothing there either
		case err != nil:
			return fmt.Errorf("read volume: %w", err)
		case info.IsDir():
			if err := t.dir(p, r); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := t.file(p, r, info); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *tree) file(real, rel string, info fs.FileInfo) error {
	f, err := os.Open(real)
	if err != nil {
		return fmt.Errorf("read volume: %w", err)
	}
	defer f.Close()
	left := MaxVolumeSize - t.size
	b, err := io.ReadAll(io.LimitReader(f, left+1))
	if err != nil {
		return fmt.Errorf("read volume: %w", err)
	}
	if int64(len(b)) > left {
		return fmt.Errorf("read volume: more than %d MiB of files", MaxVolumeSize>>20)
	}
	t.size += int64(len(b))
	if rel == ReservedKey {
		t.v.Reserved = b
		return nil
	}
	t.v.Files = append(t.v.Files, File{Path: rel, Data: b, Mode: info.Mode().Perm()})
	return nil
}

func keyOf(info fs.FileInfo) fileKey {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return fileKey{uint64(st.Dev), uint64(st.Ino)}
	}
	return fileKey{}
}
