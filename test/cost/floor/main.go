// Command floor is the least a config-reload sidecar can be: it watches the
// root of each directory given with inotify (fsnotify) and POSTs to one URL
// each time the kubelet's ..data link is swapped there. No metrics, no
// hashing, no retries, no debounce, no log beyond one "ready" line on
// stdout. test/cost measures it beside hotreload in the same run, as the
// floor that hotreload's figures are compared with. It is not a product.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

func main() {
	url := flag.String("url", "", "URL to POST to when ..data is swapped")
	flag.Parse()
	if *url == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: floor --url=URL DIR...")
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
	for {
		select {
		case ev := <-w.Events:
			if filepath.Base(ev.Name) != "..data" || !(ev.Has(fsnotify.Create) || ev.Has(fsnotify.Write)) {
				continue
			}
			resp, err := http.Post(*url, "text/plain", nil)
			if err != nil {
				fmt.Fprintln(os.Stderr, "reload:", err)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		case err := <-w.Errors:
			fmt.Fprintln(os.Stderr, "inotify:", err)
		}
	}
}
