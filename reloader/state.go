package reloader

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// StateFile records, per volume and per target, the content last delivered,
// so that a restarted hotreload (a crash, an OOM kill, a failed liveness
// probe: the pod and its volumes stay) can tell a change made while it was
// not running from the content the app already has. It belongs on an
// emptyDir, which survives container restarts. Writes are atomic: a
// temporary file in the same directory, fsynced, renamed over the old one.
type StateFile struct {
	path string
	last []byte // what was written last, to skip identical writes
}

// StateEntry is the content of one volume delivered to one target.
type StateEntry struct {
	Hash [32]byte
	At   time.Time
}

// stateVersion is the version of the file's format.
const stateVersion = 1

// stateJSON is the file's format:
//
//	{"version":1,"volumes":{"/etc/config":{"http://localhost:9090/-/reload":{"hash":"<sha256 hex>","delivered_at":"<RFC 3339>"}}}}
type stateJSON struct {
	Version int                                  `json:"version"`
	Volumes map[string]map[string]stateEntryJSON `json:"volumes"`
}

type stateEntryJSON struct {
	Hash        string    `json:"hash"`
	DeliveredAt time.Time `json:"delivered_at"`
}

// OpenStateFile checks that path can be written (its directory exists and
// is writable, and it is not a directory) and returns the StateFile. Its
// errors are one line that says what is wrong, and leaves it to the caller
// to name the file.
func OpenStateFile(path string) (*StateFile, error) {
	if path == "" {
		return nil, errors.New("must not be empty")
	}
	dir := filepath.Dir(path)
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("directory %s does not exist (mount an emptyDir there)", dir)
	case err != nil:
		return nil, fmt.Errorf("%w", err)
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return nil, errors.New("is a directory, want a file name in it")
	}
	f, err := os.CreateTemp(dir, ".hotreload-state-check-*")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in the message already
		}
		return nil, fmt.Errorf("cannot create a file in %s: %w", dir, err)
	}
	f.Close()
	os.Remove(f.Name())
	return &StateFile{path: path}, nil
}

// Path is the file's path.
func (s *StateFile) Path() string { return s.path }

// load reads the file: target -> directory -> entry. A missing file (the
// first start of the pod) is nil; an unreadable or corrupt one is logged
// once and is nil too, and is rewritten.
func (s *StateFile) load(logger log.Logger) map[string]map[string]StateEntry {
	b, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		level.Info(logger).Log("msg", "no state file yet (first start of the pod): recording the startup content as delivered", "state_file", s.path)
		return nil
	}
	out, err := decodeState(b, err)
	if err != nil {
		level.Warn(logger).Log("msg", "cannot read the state file, treating it as missing and rewriting it: a change made while hotreload was not running is not reloaded this time", "state_file", s.path, "err", err)
		return nil
	}
	return out
}

func decodeState(b []byte, readErr error) (map[string]map[string]StateEntry, error) {
	if readErr != nil {
		return nil, readErr
	}
	var j stateJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if j.Version != stateVersion {
		return nil, fmt.Errorf("version %d, want %d", j.Version, stateVersion)
	}
	out := map[string]map[string]StateEntry{}
	for dir, targets := range j.Volumes {
		for name, e := range targets {
			var h [32]byte
			if n, err := hex.Decode(h[:], []byte(e.Hash)); err != nil || n != len(h) || len(e.Hash) != 2*len(h) {
				return nil, fmt.Errorf("volume %s, target %s: hash %q is not 64 hex digits", dir, name, e.Hash)
			}
			if out[name] == nil {
				out[name] = map[string]StateEntry{}
			}
			out[name][dir] = StateEntry{Hash: h, At: e.DeliveredAt}
		}
	}
	return out, nil
}

// save writes volumes (directory -> target -> entry) atomically, unless the
// file already holds exactly that.
func (s *StateFile) save(volumes map[string]map[string]StateEntry) error {
	j := stateJSON{Version: stateVersion, Volumes: map[string]map[string]stateEntryJSON{}}
	for dir, targets := range volumes {
		j.Volumes[dir] = map[string]stateEntryJSON{}
		for name, e := range targets {
			j.Volumes[dir][name] = stateEntryJSON{Hash: hex.EncodeToString(e.Hash[:]), DeliveredAt: e.At.UTC()}
		}
	}
	b, err := json.MarshalIndent(j, "", "  ") // maps marshal sorted: same state, same bytes
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	b = append(b, '\n')
	if bytes.Equal(b, s.last) {
		return nil
	}
	if err := writeAtomic(s.path, b); err != nil {
		return err
	}
	s.last = b
	return nil
}

// writeAtomic replaces path with b: a temporary file in the same directory,
// written and fsynced, renamed over path, and the directory fsynced, so that
// a crash leaves either the old file or the new one.
func writeAtomic(path string, b []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("sync state: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("rename state: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // some filesystems refuse; the rename is done either way
		d.Close()
	}
	return nil
}
