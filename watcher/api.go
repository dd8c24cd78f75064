package watcher

import "time"

// Change says that the content of one watched directory differs from what
// the watcher last saw.
type Change struct {
	Dir  string    // the directory as given in Options.Dirs
	Hash [32]byte  // SHA-256 of the directory's content, see HashDir
	Time time.Time // when the change was detected
}
