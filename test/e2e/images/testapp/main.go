// Command testapp is the e2e suite's observer: an app that reads its config
// from directories, as a real app would, and says exactly what it loaded and
// when. With no flags it is the app of examples/generic: it listens on :8080,
// reads /etc/my-app, and reloads on POST /admin/reload when the request
// carries the bearer token of /var/run/secrets/my-app/reload/token.
//
//	GET  /config          what it loaded: {"generation":N,"loaded_at":..,"files":{path:content},"env":{name:value}}
//	GET  /healthz         200, or 503 while a file it loaded contains "e2e-unhealthy" (a readiness probe)
//	POST <--reload-path>  re-read every --dir; 401 without the token, 500 if a dir cannot be read
//	SIGHUP                re-read as well
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

type loaded struct {
	Generation int               `json:"generation"`
	LoadedAt   time.Time         `json:"loaded_at"`
	Files      map[string]string `json:"files"`
	Env        map[string]string `json:"env,omitempty"`
}

type app struct {
	dirs      []string
	envs      []string
	tokenFile string

	mu  sync.Mutex
	cur loaded
}

// read returns every regular file that the dirs' visible names show, the way
// an app reading its config directory sees it: names starting with ".." are
// the kubelet's and skipped.
func (a *app) read() (map[string]string, error) {
	files := map[string]string{}
	for _, dir := range a.dirs {
		err := walkVisible(dir, func(path string) error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[path] = string(b)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

func walkVisible(dir string, f func(string) error) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		info, err := os.Stat(p)
		if err != nil {
			return err
		}
		switch {
		case info.IsDir():
			if err := walkVisible(p, f); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := f(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func (a *app) reload(why string) error {
	files, err := a.read()
	if err != nil {
		log.Printf("reload (%s) failed: %v", why, err)
		return err
	}
	a.mu.Lock()
	a.cur = loaded{Generation: a.cur.Generation + 1, LoadedAt: time.Now().UTC(), Files: files}
	for _, e := range a.envs {
		if a.cur.Env == nil {
			a.cur.Env = map[string]string{}
		}
		a.cur.Env[e] = os.Getenv(e)
	}
	gen := a.cur.Generation
	a.mu.Unlock()
	log.Printf("loaded generation %d (%s): %d files", gen, why, len(files))
	return nil
}

func (a *app) authorized(r *http.Request) bool {
	if a.tokenFile == "" {
		return true
	}
	b, err := os.ReadFile(a.tokenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && r.Header.Get("Authorization") == "Bearer "+strings.TrimSpace(string(b))
}

func main() {
	var dirs stringList
	listen := flag.String("listen", ":8080", "address to serve on")
	reloadPath := flag.String("reload-path", "/admin/reload", "path of the reload endpoint (POST)")
	tokenFile := flag.String("token-file", "/var/run/secrets/my-app/reload/token", "bearer token the reload endpoint wants; not checked while the file does not exist; empty turns the check off")
	flag.Var(&dirs, "dir", "directory to read (repeatable; default /etc/my-app)")
	var envs stringList
	flag.Var(&envs, "env", "environment variable to report in /config (repeatable): config that env vars hold")
	flag.Parse()
	if len(dirs) == 0 {
		dirs = stringList{"/etc/my-app"}
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)
	a := &app{dirs: dirs, envs: envs, tokenFile: *tokenFile}
	if err := a.reload("start"); err != nil {
		log.Fatalf("read config at start: %v", err)
	}

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			_ = a.reload("SIGHUP")
		}
	}()

	http.HandleFunc(*reloadPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if !a.authorized(r) {
			http.Error(w, "bad or missing bearer token", http.StatusUnauthorized)
			return
		}
		if err := a.reload("POST " + *reloadPath); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("reloaded\n"))
	})
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		for path, content := range a.cur.Files {
			if strings.Contains(content, "e2e-unhealthy") {
				http.Error(w, path+" says e2e-unhealthy", http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ok\n"))
	})
	http.HandleFunc("/config", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a.cur)
	})
	log.Printf("serving on %s, reading %s", *listen, strings.Join(dirs, ","))
	log.Fatal(http.ListenAndServe(*listen, nil))
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
