//go:build !unix

package watcher

import (
	"os"
	"time"
)

// fileID identifies a directory; without inode numbers, by its real path.
type fileID struct {
	dev, ino uint64
	path     string
}

func idOf(path string, _ os.FileInfo) fileID {
	return fileID{path: path}
}

func openRegular(name string) (*os.File, error) {
	return os.Open(name)
}

// metaOf returns what can be seen of the file name without reading it.
func metaOf(name string) (fileMeta, error) {
	info, err := os.Stat(name)
	if err != nil {
		return fileMeta{}, err
	}
	return fileMeta{size: info.Size(), mtime: info.ModTime().UnixNano()}, nil
}

// changeTime is unknown here: the far future, so that nothing compares as
// later.
func changeTime(string) time.Time { return time.Unix(1<<62, 0) }
