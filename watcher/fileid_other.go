//go:build !unix

package watcher

import "os"

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
