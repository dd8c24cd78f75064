package watcher

// The options of New, and the errors that name them.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// DefaultPollInterval is the poll period used when Options.PollInterval is 0.
const DefaultPollInterval = 5 * time.Second

// DirError is a problem with one of the directories of Options that New
// found. The package names no command-line flag; a command that takes the
// directories as a flag names it (hotreload's internal/config:
// --volume-dir).
type DirError struct {
	Dir string // as given
	Err error
}

func (e *DirError) Error() string { return fmt.Sprintf("option Dirs %q: %v", e.Dir, e.Err) }

func (e *DirError) Unwrap() error { return e.Err }

// Options configures a Watcher.
type Options struct {
	// Dirs are the volume directories. A path given twice is watched
	// once. One that is missing for longer than 30 seconds is logged at
	// warning level, exported, and makes Ready fail until it appears.
	Dirs []string
	// OptionalDirs are watched like Dirs, but may be missing for good.
	OptionalDirs []string
	// ResyncInterval is how often the stats of every directory are
	// compared with what its last hash saw, and a directory whose stats
	// differ is hashed again: a safety net for missed events; 0 turns it
	// off.
	ResyncInterval time.Duration
	// PollInterval is the poll period for directories that inotify cannot
	// watch, or that do not exist yet; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Poll never uses inotify and always polls, for filesystems that do
	// not support it.
	Poll bool
}

// volumes checks opts, and returns a volume for each directory, a path
// given twice once.
func (opts Options) volumes() ([]*volume, error) {
	if len(opts.Dirs)+len(opts.OptionalDirs) == 0 {
		return nil, errors.New("option Dirs: at least one directory is required")
	}
	if opts.ResyncInterval < 0 {
		return nil, fmt.Errorf("option ResyncInterval %s: must not be negative", opts.ResyncInterval)
	}
	if opts.PollInterval < 0 {
		return nil, fmt.Errorf("option PollInterval %s: must not be negative", opts.PollInterval)
	}
	var vols []*volume
	seen := make(map[string]bool)
	for i, d := range slices.Concat(opts.Dirs, opts.OptionalDirs) {
		if d == "" {
			return nil, &DirError{Dir: d, Err: errors.New("must not be empty")}
		}
		info, err := os.Stat(d)
		switch {
		case err == nil && !info.IsDir():
			return nil, &DirError{Dir: d, Err: fmt.Errorf("%w: "+subPathHint, errNotDir)}
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return nil, &DirError{Dir: d, Err: err}
		}
		if c := filepath.Clean(d); !seen[c] {
			seen[c] = true
			vols = append(vols, &volume{
				dir: d, path: c, optional: i >= len(opts.Dirs),
				running: true, // by Run, until the first hash is done
				hash:    emptyHash,
			})
		}
	}
	return vols, nil
}
