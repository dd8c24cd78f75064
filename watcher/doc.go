// Package watcher watches directories, such as Kubernetes ConfigMap and
// Secret volumes, and reports when the content an app reads from them
// changes.
//
// It watches directories, never single files, with inotify (fsnotify), and
// decides by content: an event only marks a volume dirty, the volume is
// re-hashed (see HashDir: what the app sees through the volume's visible
// names) and a Change is sent when the hash differs from the last one
// reported. Attribute-only events, reads, and a kubelet swap to identical
// content therefore change nothing, and no event that could change what an
// app sees is ever filtered by its op name. Every dirty volume is hashed by a
// goroutine of its own, so a small volume's change never waits behind a
// large volume's hash; the Changes of one volume are sent in order. An idle
// volume has no goroutine.
//
// # Cost
//
// Events that cannot change what an app sees make no volume dirty: the
// creation and the move away of ..data_tmp (the arrival of ..data that
// follows has its own event), and the creation and deletion of kubelet
// version directories that ..data does not name. The swap of ..data does
// not mark a volume whose hash, done or under way, already read ..data
// naming the new version. The root and the new version directory are
// watched before they are read, and a state that will not be reported is
// not read. A volume of flat keys is therefore walked once at start, and a
// kubelet update reads each of its files once. A directory that a walk finds
// and does not watch yet (a subdirectory of items, in each new version) was
// read before its watch existed, so the volume is walked a second time.
// Each volume remembers the digest of every file it read, with its inode,
// size, modification and change time: a file whose stat is unchanged is not
// read again (a file changed less than a second before the hash is always
// read again, since file times tick coarsely). A plain directory without
// symlinks or hard-linked files is not walked at all after its first hash:
// inotify names every entry that changes in it, so an event re-reads what
// it names (a file, or a directory's subtree) and the hash is folded again
// from the digests remembered (see plainTree). A mark that names no path
// (the resync, an inotify queue overflow, a poll, more than 1024 paths
// between two hashes) walks the volume; the resync and an overflow read
// every file.
//
// inotify watches inodes, and fsnotify names a watch by the path it was
// first added under: a renamed directory, and every directory below it,
// keeps its watch and its old name. The watcher knows the directory behind
// each watched path, translates an event's name back into the paths that
// hold the directory, and renames a watch whose name no path holds any more
// (see index.go).
//
// # What is never reported
//
// A Change is sent only for a state an app can read in full. These states
// are never reported; the volume is waited for instead:
//
//   - Missing: the root does not exist, is not a directory or cannot be
//     read. Logged once; the nearest existing parent is watched and the
//     root polled.
//   - Broken: ..data is a symlink that names no directory (dangling, or a
//     file), or every visible entry of the root is a dangling symlink.
//     Logged once per incident at warning level; never reported, however
//     long it lasts. The volume keeps its watches and is also re-checked on
//     every poll tick.
//   - Half-way through an update (partial). The kubelet writes a volume in
//     steps, and an rm -rf or a hand edit passes through states that no
//     writer meant: ..data_tmp exists (a swap is under way); an item of the
//     version directory that ..data names has no visible entry yet (the
//     kubelet renames ..data before it links new keys); a visible symlink
//     into ..data names an item that does not exist (a vanished key not yet
//     unlinked); the version directory that ..data names changed after it
//     was published (the kubelet never writes into a published version:
//     its content differs from the last hash of the same version, one of
//     its directories is empty, or a directory's mtime is later than the
//     swap of ..data); a volume that had ..data lost it; a kubelet volume
//     shows no item at all; an entry vanished while it was read; the
//     listing of the root or of the version directory differed after the
//     files were read; or the volume was marked dirty again while it was
//     hashed (what was hashed is already stale; not by the swap of ..data
//     to the version the hash read, nor by an event noted before the hash
//     began). The next step makes an event, and the volume is re-hashed
//     then. A state that lasts longer than the settle bound (2s) is not a
//     writer at work but a hand-made directory, or a ConfigMap emptied on
//     purpose: it is reported, with a warning.
//
// When a volume comes back from any of these states with the content last
// reported, nothing is sent. A plain directory (one that never had ..data)
// whose files are removed, even all of them, is a real change and is
// reported at once: only a dangling symlink or a kubelet layout out of step
// marks a state as incomplete. An rm -rf of a plain directory may therefore
// be reported half-way; an rm -rf of a kubelet volume is not, short of one
// that starts within the same filesystem timestamp tick as the swap of a
// version that the watcher has not yet hashed whole. A volume that
// keeps changing (a file appended every few milliseconds) is reported at
// least every 2s.
//
// # Unreadable files
//
// A file that cannot be read (a Secret item with mode 0400 and hotreload
// running as another UID) is hashed by its size, modification time, inode
// and device, so that its rotation or rewrite is still reported; each such
// change is logged at warning level with the pod settings that make the file
// readable.
//
// # inotify
//
// inotify watches sit on real directories: the volume's root, every
// directory the last hash walked (the kubelet's current version directory,
// subdirectories, directories reached through symlinks) and the directories
// of files reached through symlinks. The watch on a version directory is
// dropped as soon as the swap of ..data is seen, before the kubelet deletes
// it. A --volume-dir that is itself a symlink re-pointed elsewhere is seen
// only by the resync. When inotify instances or watches run out, one line
// names the sysctl to raise and the affected volumes are polled; every poll
// interval the watcher tries inotify again and logs when it is back. A
// volume that does not exist yet is waited for, and one that is deleted is
// waited for again. The poll ticker runs only while some volume needs it.
//
// The package is a library: it knows nothing of hotreload's command line.
// Its errors name options by their field in Options (Dirs, PollInterval),
// with a *DirError for one directory; hotreload's internal/config names the
// flags instead.
package watcher
