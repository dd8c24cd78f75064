package watcher

// The kubelet's consistency rules. The kubelet writes a volume in steps: a
// new version directory, ..data_tmp, the rename of ..data_tmp over ..data
// (the swap), the links of new keys, the unlinking of vanished ones, the
// old version removed. The walk (hash.go) collects what it met in
// kubeletFacts; the rules here say whether that is a state an app can read
// whole (see "What is never reported" in the package documentation).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// dataLink is the symlink through which the kubelet publishes the current
// version directory of a ConfigMap, Secret, downwardAPI or projected volume.
const dataLink = "..data"

// reasonVanished says that a volume was busy, not inconsistent.
const reasonVanished = "an entry vanished while it was read"

// hidden reports whether a name is skipped: the kubelet's "..data",
// "..data_tmp" and "..<timestamp>" entries, and anything else starting
// with "..".
func hidden(name string) bool {
	return strings.HasPrefix(name, "..")
}

// kubeletFacts is what a walk met that the kubelet's rules judge.
type kubeletFacts struct {
	noVersion    string    // what ..data names, if it names no directory
	dataTmp      bool      // ..data_tmp exists
	items        []string  // the visible names in the version directory that ..data names
	dangling     int       // the root's visible entries that dangle
	vanishedLink string    // a visible link into ..data that names a missing item
	vanished     bool      // an entry vanished while it was read: someone is at work
	dataDir      string    // the version directory ..data names, if any
	dataChanged  time.Time // the latest mtime of a directory walked inside dataDir
	emptyDir     string    // an empty directory inside dataDir (visible path)
}

// judge returns why the root real, whose visible names are visible and
// where the walk met f, is broken (never reported) or looks half-way
// through an update ("" if it does not).
func (f *kubeletFacts) judge(real string, visible map[string]bool) (broken, partial string) {
	if f.noVersion != "" {
		return fmt.Sprintf("..data names no directory (%s)", f.noVersion), ""
	}
	switch {
	case f.dataTmp:
		partial = "..data_tmp exists: a swap is under way"
	case f.vanishedLink != "":
		partial = fmt.Sprintf("visible link %s names a vanished item", f.vanishedLink)
	default:
		for _, name := range f.items {
			if !visible[name] { // the kubelet renames ..data before it links new keys
				partial = fmt.Sprintf("item %s has no visible link yet", name)
				break
			}
		}
	}
	if len(visible) > 0 && f.dangling == len(visible) {
		return "every visible entry dangles", partial
	}
	if partial != "" {
		return "", partial
	}
	switch {
	case f.vanished:
		return "", reasonVanished
	case f.emptyDir != "":
		return "", fmt.Sprintf("directory %s of the version that ..data names is empty (the kubelet makes directories only for items: an rm -rf is under way)", f.emptyDir)
	case f.dataDir != "" && f.dataChanged.After(changeTime(filepath.Join(real, dataLink))):
		// The kubelet fills a version directory before it renames ..data
		// to name it (which sets the link's change time), and never
		// touches it again.
		return "", "the version directory that ..data names changed after ..data was swapped to it (the kubelet never does that)"
	}
	return "", ""
}

// published reports whether path is the version directory that ..data
// names or inside it: never changed by the kubelet, which writes a new
// version and swaps ..data, in the root.
func (f *kubeletFacts) published(path string) bool {
	return f.dataDir != "" && (path == f.dataDir || f.inVersion(path))
}

// inVersion reports whether path is inside the version directory.
func (f *kubeletFacts) inVersion(path string) bool {
	return f.dataDir != "" && strings.HasPrefix(path, f.dataDir+string(filepath.Separator))
}

// versionDir resolves and lists the version directory that ..data names
// (version), and records its visible names; or that it names none.
func (w *walk) versionDir(real, version string) {
	if version == "" {
		return
	}
	dir := version
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(real, dir)
	}
	named := dir
	dir, info, err := resolveDir(dir)
	var entries []os.DirEntry
	if err == nil {
		entries, err = os.ReadDir(dir)
	}
	if err != nil {
		w.noVersion = version
		return
	}
	w.dataDir, w.dataChanged = dir, info.ModTime()
	if dir != named || filepath.Dir(dir) != real { // a symlink, or not a directory of the root
		w.links = true // not the kubelet's layout: the root's stamp does not vouch for it
	}
	for _, e := range entries {
		if !hidden(e.Name()) {
			w.items = append(w.items, e.Name())
		}
	}
}

// kubeletLink adds what the kubelet's visible link name (..data/rest)
// shows, resolved through the version directory already resolved, as the
// app would, so that every file comes from that one version (..data is
// read again after the walk). One naming a key that ..data no longer has
// is a moment of an update, not a problem of the content: the kubelet
// unlinks it next.
func (w *walk) kubeletLink(name, rest string) {
	p := filepath.Join(w.dataDir, rest)
	info, err := os.Lstat(p)
	switch {
	case err == nil:
		w.visitInfo(name, p, info)
	case gone(err):
		w.vanishedLinkOf(name)
	default:
		w.problem(name, err)
	}
}

// vanishedLinkOf records that the visible link name names a vanished item.
func (w *walk) vanishedLinkOf(name string) {
	if w.vanishedLink == "" {
		w.vanishedLink = name
	}
}

// versionDirListed records what the listing of the directory dir (visible
// path rel) inside the version directory shows: the kubelet makes
// directories only as parents of items, and never changes them afterwards.
func (w *walk) versionDirListed(rel, dir string, entries []os.DirEntry) {
	if !w.inVersion(dir) {
		return
	}
	if len(entries) == 0 {
		w.emptyDir = rel
	}
	if after, err := os.Stat(dir); err == nil && after.ModTime().After(w.dataChanged) {
		w.dataChanged = after.ModTime() // read after the listing: the latest change
	}
}

// partial returns why res looks half-way through an update, or "": what
// the hash saw alone, or a change from what was last reported that the
// kubelet never makes.
func (v *volume) partial(res hashResult) string {
	switch {
	case res.partial != "" || res.sum == v.hash:
		return res.partial
	case res.version != "" && res.version == v.version && res.versionSum != v.versionSum:
		return "the version directory that ..data names changed in place (the kubelet never does that)"
	case res.version == "" && v.version != "":
		return "..data vanished (the volume is being deleted or written for the first time)"
	case res.version != "" && res.sum == emptyHash:
		return "the kubelet volume shows no item (an rm -rf half-way, or an emptied ConfigMap)"
	}
	return ""
}
