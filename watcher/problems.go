package watcher

// Problems of a volume's content (an unreadable file, a symlink loop, a
// dangling link): logged and counted once each.

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/go-kit/log/level"
)

// unreadableHint says how to make an unreadable file readable.
const unreadableHint = "set the pod's fsGroup, run hotreload as the file owner's runAsUser, or give the volume a defaultMode that lets group/others read"

// problemState is what was logged of a volume's problems.
type problemState struct {
	logged     map[string]bool     // problems logged, by path and kind
	unreadable map[string]fileMeta // what was last seen of each unreadable file
}

// report logs and counts the problems of a hash that were not already
// reported for the volume; a problem that went away is forgotten, so that
// it is reported again if it comes back.
func (w *Watcher) report(v *volume, problems []problem) {
	now := make(map[string]bool, len(problems))
	for _, p := range problems {
		key := p.path + "\x00" + problemKind(p.err)
		now[key] = true
		if v.logged[key] {
			continue
		}
		w.errorsTotal.Inc()
		if errors.Is(p.err, fs.ErrPermission) {
			level.Warn(w.logger).Log("msg", "cannot read file, watching its size, modification time and inode instead of its content; to fix, "+unreadableHint, "dir", v.dir, "path", p.path, "err", p.err)
			continue
		}
		level.Warn(w.logger).Log("msg", "cannot hash entry, leaving its content out", "dir", v.dir, "path", p.path, "err", p.err)
	}
	v.logged = now
}

// reportUnreadable logs, at warning level, every unreadable file whose size,
// modification time or inode changed since the last reported hash, and
// records what is seen now.
func (w *Watcher) reportUnreadable(v *volume, now map[string]fileMeta, initial bool) {
	if !initial {
		for rel, m := range now {
			if before, ok := v.unreadable[rel]; ok && before != m {
				level.Warn(w.logger).Log("msg", "unreadable file changed, reloading on its size, modification time or inode alone; to have its content compared, "+unreadableHint,
					"dir", v.dir, "path", rel, "change", before.diff(m))
			}
		}
	}
	v.unreadable = now
}

func problemKind(err error) string {
	switch {
	case errors.Is(err, errSymlinkLoop):
		return "loop"
	case errors.Is(err, errDanglingLink):
		return "dangling"
	case errors.Is(err, fs.ErrPermission):
		return "permission"
	default:
		return "other"
	}
}

// diff names what differs between m (before) and n (now).
func (m fileMeta) diff(n fileMeta) string {
	var d []string
	if m.size != n.size {
		d = append(d, fmt.Sprintf("size %d -> %d", m.size, n.size))
	}
	if m.mtime != n.mtime {
		d = append(d, "mtime "+time.Unix(0, m.mtime).UTC().Format(time.RFC3339Nano)+" -> "+time.Unix(0, n.mtime).UTC().Format(time.RFC3339Nano))
	}
	if m.dev != n.dev || m.ino != n.ino {
		d = append(d, fmt.Sprintf("inode %d:%d -> %d:%d", m.dev, m.ino, n.dev, n.ino))
	}
	return strings.Join(d, ", ")
}
