// Command floor is the least a config-reload sidecar can be: it watches the
// root of each directory given with inotify (fsnotify) and POSTs to one URL
// each time the kubelet's ..data link is swapped there. No metrics, no
// hashing, no retries, no debounce, no log beyond one "ready" line on
// stdout. test/cost measures it beside hotreload in the same run, as the
// floor that hotreload's figures are compared with. It is not a product.
//
// With --read and --debounce it is the reading floor: the least a sidecar
// that decides by content pays per change. It reads and hashes (SHA-256)
// every visible file of the swapped directory once (as an app would read
// them: through the kubelet's links, into subdirectories) and POSTs when no
// swap has come for the debounce.
package main

import (
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

const usage = "usage: floor --url=URL [--read] [--debounce=D] DIR..."

// config is what the command line asks for.
type config struct {
	url      string
	read     bool
	debounce time.Duration
	dirs     []string
}

// parseArgs parses the command line (without the program's name).
func parseArgs(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.url, "url", "", "URL to POST to when ..data is swapped")
	fs.BoolVar(&c.read, "read", false, "read and hash every visible file of the directory once on each swap")
	fs.DurationVar(&c.debounce, "debounce", 0, "POST this long after the last swap (0: at once)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	c.dirs = fs.Args()
	switch {
	case c.url == "":
		return config{}, errors.New("--url is required")
	case len(c.dirs) == 0:
		return config{}, errors.New("no directory to watch")
	case c.debounce < 0:
		return config{}, fmt.Errorf("--debounce=%s is negative", c.debounce)
	}
	return c, nil
}

func main() {
	c, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n%s\n", err, usage)
		os.Exit(2)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		fmt.Fprintln(os.Stderr, "inotify:", err)
		os.Exit(1)
	}
	for _, d := range c.dirs {
		if err := w.Add(d); err != nil {
			fmt.Fprintln(os.Stderr, "watch:", err)
			os.Exit(1)
		}
	}
	fmt.Println("ready")
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case ev := <-w.Events:
			if filepath.Base(ev.Name) != "..data" || !(ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write)) {
				continue
			}
			if c.read {
				if _, err := readVisible(filepath.Dir(ev.Name), sha256.New()); err != nil {
					fmt.Fprintln(os.Stderr, "read:", err)
				}
			}
			if c.debounce > 0 {
				timer.Reset(c.debounce)
				continue
			}
			post(c.url)
		case <-timer.C:
			post(c.url)
		case err := <-w.Errors:
			fmt.Fprintln(os.Stderr, "inotify:", err)
		}
	}
}

// post sends one reload request to url.
func post(url string) {
	resp, err := http.Post(url, "text/plain", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reload:", err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// readVisible feeds h every file that an app sees under dir, once each, in
// the order of their names, following links and skipping the kubelet's own
// names (those starting with ".."). It returns how many bytes it read.
func readVisible(dir string, h hash.Hash) (int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(p)
		if errors.Is(err, syscall.EISDIR) {
			m, err := readVisible(p, h)
			if err != nil {
				return n, err
			}
			n += m
			continue
		}
		if err != nil {
			return n, err
		}
		h.Write(b)
		n += int64(len(b))
	}
	return n, nil
}
