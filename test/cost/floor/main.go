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

func main() {
	url := flag.String("url", "", "URL to POST to when ..data is swapped")
	read := flag.Bool("read", false, "read and hash every visible file of the directory once on each swap")
	debounce := flag.Duration("debounce", 0, "POST this long after the last swap (0: at once)")
	flag.Parse()
	if *url == "" || flag.NArg() == 0 || *debounce < 0 {
		fmt.Fprintln(os.Stderr, "usage: floor --url=URL [--read] [--debounce=D] DIR...")
		os.Exit(2)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		fmt.Fprintln(os.Stderr, "inotify:", err)
		os.Exit(1)
	}
	for _, d := range flag.Args() {
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
			if *read {
				if _, err := readVisible(filepath.Dir(ev.Name), sha256.New()); err != nil {
					fmt.Fprintln(os.Stderr, "read:", err)
				}
			}
			if *debounce > 0 {
				timer.Reset(*debounce)
				continue
			}
			post(*url)
		case <-timer.C:
			post(*url)
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
