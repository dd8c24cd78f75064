package reloader

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"golang.org/x/sys/unix"
)

// StateFile records, per volume and per target, the content last delivered,
// so that a restarted hotreload (a crash, an OOM kill, a failed liveness
// probe: the pod and its volumes stay) can tell a change made while it was
// not running from the content the app already has. It belongs on an
// emptyDir, which survives container restarts. Writes are atomic: a
// temporary file in the same directory, fsynced, renamed over the old one.
//
// The file is only ever one that hotreload wrote: OpenStateFile refuses to
// replace anything else (a device, a link, another program's file), and
// holds a lock on it (a file beside it, with ".lock" added) until Close, so
// that two processes never share it.
type StateFile struct {
	path    string
	lock    *os.File
	removed int    // temporary files of an earlier run removed by OpenStateFile
	last    []byte // what was written last, to skip identical writes
}

// StateEntry is the content of one volume delivered to one target.
type StateEntry struct {
	// Value is the content value (see value.go), in full; "" when the
	// volume has none.
	Value string
	// Hash is the content hash itself, which only a file of the first
	// format holds.
	Hash *[32]byte
	At   time.Time
}

// stateFormat is the format of the file hotreload writes.
const stateFormat = 2

// maxStateSize bounds the file that is read at start. Each record takes
// about 200 bytes: a megabyte is some 5,000 volume-and-target pairs, and
// decodes in a few megabytes of memory. A larger file is not one that
// hotreload wrote for a pod, and is treated as unreadable.
const maxStateSize = 1 << 20

// stateJSON is the file's format. It holds, per volume and target, the
// content value, never the content hash: without a key, a Secret volume's
// entry has no value at all. See value.go.
//
//	{"hotreload_state":2,"key_id":"<16 hex, or absent without a key>",
//	 "volumes":{"/etc/config":{"http://localhost:9090/-/reload":{"value":"<64 hex>","delivered_at":"<RFC 3339>"}}}}
type stateJSON struct {
	Format  int                                  `json:"hotreload_state"`
	KeyID   string                               `json:"key_id,omitempty"`
	Volumes map[string]map[string]stateEntryJSON `json:"volumes"`
}

type stateEntryJSON struct {
	Value       string    `json:"value,omitempty"`
	DeliveredAt time.Time `json:"delivered_at"`
}

// stateV1JSON is the format of hotreload before values: it kept the
// content hash of every volume, which can be tried against guesses. Such a
// file is read, and rewritten in the current format.
//
//	{"version":1,"volumes":{"/etc/config":{"http://localhost:9090/-/reload":{"hash":"<sha256 hex>","delivered_at":"<RFC 3339>"}}}}
type stateV1JSON struct {
	Version int `json:"version"`
	Volumes map[string]map[string]struct {
		Hash        string    `json:"hash"`
		DeliveredAt time.Time `json:"delivered_at"`
	} `json:"volumes"`
}

// OpenStateFile checks that path can be written (its directory exists and
// is writable) and that it names nothing but a state file of hotreload's or
// an empty file, locks it, and removes the temporary files that an earlier
// run left beside it (a crash between writing and renaming). Its errors are
// one line that says what is wrong, and leave it to the caller to name the
// file.
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
		return nil, err
	case !info.IsDir():
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if err := checkReplaceable(path); err != nil {
		return nil, err
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

	s := &StateFile{path: path}
	if s.lock, err = lockFile(path + ".lock"); err != nil {
		return nil, err
	}
	// Only now, holding the lock: the temporary files of another
	// hotreload's write in progress would be its own.
	s.removed = removeTemporary(dir, filepath.Base(path))
	return s, nil
}

// checkReplaceable refuses a path that names anything but a state file that
// hotreload wrote, or an empty file: replacing it would destroy something.
func checkReplaceable(path string) error {
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case info.IsDir():
		return errors.New("is a directory, want a file name in it")
	case !info.Mode().IsRegular():
		return fmt.Errorf("is a %s, not a file that hotreload wrote: refusing to replace it", fileKind(info.Mode()))
	case info.Size() == 0:
		return nil // nothing to lose: as a missing file
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	if !looksLikeState(head[:n]) {
		return errors.New("exists and was not written by hotreload: refusing to replace it; give a file of its own, on an emptyDir")
	}
	return nil
}

// looksLikeState reports whether head, the beginning of a file, is that of
// a state file, even one cut short or damaged further on: a JSON object
// whose first key is "hotreload_state" (or "version", in the first format)
// and which has "volumes", as every version of hotreload wrote them.
func looksLikeState(head []byte) bool {
	s := strings.TrimSpace(string(head))
	rest, ok := strings.CutPrefix(s, "{")
	rest = strings.TrimSpace(rest)
	return ok && (strings.HasPrefix(rest, `"hotreload_state"`) || strings.HasPrefix(rest, `"version"`)) && strings.Contains(s, `"volumes"`)
}

// fileKind names the type of a file that is not a regular one.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

// lockFile creates path if need be and takes an exclusive lock on it, which
// the kernel drops when the process ends, however it ends. It is never
// written and never removed: removing a lock file lets two processes each
// lock one of two files.
func lockFile(path string) (*os.File, error) {
	if info, err := os.Lstat(path); err == nil && !info.Mode().IsRegular() {
		return nil, fmt.Errorf("its lock %s is a %s: refusing to use it", path, fileKind(info.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("in use by another hotreload, which holds %s: give each hotreload a state file of its own", path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// removeTemporary removes the temporary files that writeAtomic and
// OpenStateFile make beside the state file named base in dir, and returns
// how many it removed.
func removeTemporary(dir, base string) int {
	n := 0
	for _, pattern := range []string{"." + base + ".tmp-*", ".hotreload-state-check-*"} {
		names, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, name := range names {
			if info, err := os.Lstat(name); err == nil && info.Mode().IsRegular() && os.Remove(name) == nil {
				n++
			}
		}
	}
	return n
}

// Path is the file's path.
func (s *StateFile) Path() string { return s.path }

// Close releases the lock.
func (s *StateFile) Close() error { return s.lock.Close() }

// loaded is what the file said at start.
type loaded struct {
	// records: target -> directory -> entry. Nil when the file does not
	// exist yet (the first start of the pod) or cannot be read.
	records map[string]map[string]StateEntry
	// keyID is the id of the key of the values (see keyID).
	keyID string
	// unreadable: the file exists but cannot be read, so what the app
	// has is not known.
	unreadable bool
}

// load reads the file. A missing or empty file is the first start of the
// pod; an unreadable, corrupt or oversized one is logged once and is
// unreadable.
func (s *StateFile) load(logger log.Logger) loaded {
	if s.removed > 0 {
		level.Info(logger).Log("msg", "removed the temporary files of a state file write that an earlier run did not finish", "state_file", s.path, "files", s.removed)
	}
	st, legacy, err := s.read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		level.Info(logger).Log("msg", "no state file yet (first start of the pod): recording the startup content as delivered", "state_file", s.path)
		return loaded{}
	case err != nil:
		level.Warn(logger).Log("msg", "cannot read the state file, so what the app has is not known: delivering the current content, and rewriting the file", "state_file", s.path, "err", err)
		return loaded{unreadable: true}
	}
	if legacy {
		level.Info(logger).Log("msg", "the state file is in the format of an earlier hotreload, which kept each volume's content hash: read, and rewritten in the current format, which does not", "state_file", s.path)
	}
	return st
}

// read reads and decodes the file; an empty one is fs.ErrNotExist. legacy
// reports a file of the first format.
func (s *StateFile) read() (st loaded, legacy bool, err error) {
	f, err := os.Open(s.path)
	if err != nil {
		return loaded{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStateSize+1))
	switch {
	case err != nil:
		return loaded{}, false, err
	case len(b) > maxStateSize:
		return loaded{}, false, fmt.Errorf("larger than %d bytes, more than hotreload writes", maxStateSize)
	case len(bytes.TrimSpace(b)) == 0:
		return loaded{}, false, fs.ErrNotExist
	}
	return decodeState(b)
}

// decodeState decodes a file of the current format or of the first.
func decodeState(b []byte) (st loaded, legacy bool, err error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return loaded{}, false, fmt.Errorf("decode: %w", err)
	}
	if _, ok := keys["hotreload_state"]; !ok {
		st, err := decodeStateV1(b)
		return st, true, err
	}
	var j stateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return loaded{}, false, fmt.Errorf("decode: %w", err)
	}
	if j.Format != stateFormat {
		return loaded{}, false, fmt.Errorf("format %d, want %d", j.Format, stateFormat)
	}
	st = loaded{records: map[string]map[string]StateEntry{}, keyID: j.KeyID}
	for dir, targets := range j.Volumes {
		for name, e := range targets {
			if e.Value != "" && !isHex(e.Value, 64) {
				return loaded{}, false, fmt.Errorf("volume %s, target %s: value %q is not 64 hex digits", dir, name, e.Value)
			}
			if st.records[name] == nil {
				st.records[name] = map[string]StateEntry{}
			}
			st.records[name][dir] = StateEntry{Value: e.Value, At: e.DeliveredAt}
		}
	}
	return st, false, nil
}

// decodeStateV1 decodes a file of the first format.
func decodeStateV1(b []byte) (loaded, error) {
	var j stateV1JSON
	if err := json.Unmarshal(b, &j); err != nil {
		return loaded{}, fmt.Errorf("decode: %w", err)
	}
	if j.Version != 1 {
		return loaded{}, fmt.Errorf("version %d, want 1 or format %d", j.Version, stateFormat)
	}
	st := loaded{records: map[string]map[string]StateEntry{}}
	for dir, targets := range j.Volumes {
		for name, e := range targets {
			var h [32]byte
			if !isHex(e.Hash, 64) {
				return loaded{}, fmt.Errorf("volume %s, target %s: hash %q is not 64 hex digits", dir, name, e.Hash)
			}
			hex.Decode(h[:], []byte(e.Hash))
			if st.records[name] == nil {
				st.records[name] = map[string]StateEntry{}
			}
			st.records[name][dir] = StateEntry{Hash: &h, At: e.DeliveredAt}
		}
	}
	return st, nil
}

// isHex reports whether s is n lower-case hex digits.
func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// save writes volumes (directory -> target -> entry) with the id of their
// key atomically, unless the file already holds exactly that.
func (s *StateFile) save(keyID string, volumes map[string]map[string]StateEntry) error {
	j := stateJSON{Format: stateFormat, KeyID: keyID, Volumes: map[string]map[string]stateEntryJSON{}}
	for dir, targets := range volumes {
		j.Volumes[dir] = map[string]stateEntryJSON{}
		for name, e := range targets {
			j.Volumes[dir][name] = stateEntryJSON{Value: e.Value, DeliveredAt: e.At.UTC()}
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
