// Package watcher watches directories, such as Kubernetes ConfigMap and
// Secret volumes, and reports when the content an app reads from them
// changes.
//
// # The path of a change
//
// An inotify event in a directory that a volume's last hash walked marks
// the volume dirty. A goroutine of the volume's own (one runs only while
// the volume is dirty) hashes what an app sees: HashDir, through the
// volume's visible names, with the version directory's name left out. The
// hash is compared with the last one reported, and a Change is sent if it
// differs and the volume is whole (below). Events are never filtered by
// their op name, only by the entry they name: names starting with ".."
// are hidden from the app, and of them only ..data, and the version
// directory it names, can change what the visible names show. An identical
// rewrite, a chmod, a read: the hash is the same, nothing is sent.
//
// A hash watches each directory before it lists it, so a change after the
// listing makes an event and another hash: the root, and every directory
// it walks but those inside the version directory that ..data names, which
// the kubelet never changes (an update is a new version and a swap of
// ..data, in the root). inotify watches a directory, not a path: a renamed
// directory keeps its watch. Each volume keeps what its last hash saw (see
// seen): a file whose stat is unchanged is not read again. A plain tree (no
// ..data, no symlink) is not walked again after its first hash: an event
// names the directory it happened in, which alone is listed again
// (plainTree); a directory moved or removed walks the volume.
//
// # What is never reported
//
// A Change is sent only for a state an app can read in full. These states
// are never reported; the volume is waited for instead:
//
//   - Missing: the root does not exist, is not a directory or cannot be
//     read. The nearest existing parent is watched and the root polled. A
//     directory of Options.Dirs still missing after 30s is logged at
//     warning level (again every 10 minutes), exported as
//     hotreload_volume_missing{dir}, and makes Ready fail until it appears;
//     one of Options.OptionalDirs is only logged once.
//   - Broken: ..data names no directory, or every visible entry of the
//     root is a dangling symlink. Logged once per incident at warning
//     level; never reported, however long it lasts; checked again at every
//     poll tick.
//   - Half-way through an update. The kubelet writes a volume in steps,
//     and an rm -rf or a hand edit passes through states that no writer
//     meant: ..data_tmp exists (a swap is under way); an item of the
//     version directory that ..data names has no visible entry yet (the
//     kubelet renames ..data before it links new keys); a visible link into
//     ..data names an item that does not exist (a vanished key not yet
//     unlinked); the version directory that ..data names changed after it
//     was published (its content differs from the last hash of the same
//     version, one of its directories is empty, or a directory's mtime is
//     later than the swap of ..data); a volume that had ..data lost it; a
//     kubelet volume shows no item; an entry vanished while it was read.
//     The next step makes an event, and the volume is hashed again then.
//     A state that lasts longer than 2s is not a writer at work but a
//     hand-made directory, or a ConfigMap emptied on purpose: it is
//     reported, with a warning.
//
// When a volume comes back from any of these states with the content last
// reported, nothing is sent. A plain directory (one that never had ..data)
// whose files are removed, even all of them, is a real change and is
// reported at once. A writer that is not atomic (truncate, then write) may
// be reported half-way, then whole.
//
// # Missed events: the resync and polling
//
// Every Options.ResyncInterval, the stats of every directory listed and
// every file read by each volume's last hash are compared with what that
// hash saw; a volume whose stats differ is hashed again, reading only the
// files whose stats changed. The version directory that ..data names is
// vouched for by the root's stats, as it is by the root's watch: the
// kubelet never changes a published version, it swaps ..data. A volume
// whose stats cannot vouch for it (a symlink other than the kubelet's own,
// an unreadable entry, a change within the last second) is hashed at every
// resync. An inotify queue overflow hashes every volume. A volume polled
// instead of watched is checked the same way at every poll tick.
//
// inotify is Linux's; elsewhere, and with Options.Poll, every volume is
// polled. When inotify instances or watches run out, one line names the
// sysctl to raise and the affected volumes are polled; every poll interval
// the watcher tries inotify again and logs when it is back. The poll ticker
// runs only while some volume needs it. A --volume-dir that is itself a
// symlink re-pointed elsewhere is seen by the resync alone.
//
// # Unreadable files
//
// A file that cannot be read (a Secret item with mode 0400 and hotreload
// running as another UID) is hashed by its size, modification time, inode
// and device, so that its rotation or rewrite is still reported; each such
// change is logged at warning level with the pod settings that make the file
// readable.
//
// # Reading the code
//
// The correct path is three files, read in this order: watcher.go (event,
// mark dirty, refresh, judge, send), hash.go (the walk that hashes what
// the app sees, and collects what the kubelet's rules need) and kubelet.go
// (those rules). The rest sits behind a few calls each: two fast paths,
// cache.go (seen: digests and stamps kept for the next hash and the
// resync) and plain.go (plainPath: a plain tree updated from the
// directories events name), each naming the benchmark that keeps it; and
// the handling of what goes wrong or is missed: settle.go, missing.go,
// poll.go, problems.go, watches.go and the inotify files.
//
// The package is a library: it knows nothing of hotreload's command line.
// Its errors name options by their field in Options (Dirs, PollInterval),
// with a *DirError for one directory; hotreload's internal/config names the
// flags instead.
package watcher
