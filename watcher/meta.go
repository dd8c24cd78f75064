package watcher

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// fileMeta is what can be seen of a file that cannot be read. The change
// time is left out on purpose: the kubelet's fsGroup handling and any chmod
// or chown change it without changing the content. A rotation by the
// kubelet writes a new file (new inode); a rewrite in place changes the
// modification time or the size.
type fileMeta struct {
	size     int64
	mtime    int64 // nanoseconds since the epoch
	dev, ino uint64
}

// bytes encodes m for the hash.
func (m fileMeta) bytes() []byte {
	b := make([]byte, 0, 24)
	b = binary.BigEndian.AppendUint64(b, uint64(m.mtime))
	b = binary.BigEndian.AppendUint64(b, m.dev)
	b = binary.BigEndian.AppendUint64(b, m.ino)
	return b
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
