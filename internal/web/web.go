// Package web serves hotreload's metrics and health endpoints.
package web

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	toolkit "github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
)

// Volume is the content of one volume that the app was last given.
type Volume struct {
	Dir         string    `json:"dir"`
	Hash        string    `json:"hash,omitempty"` // as in hotreload_volume_content_info; none for a Secret volume without a content key
	DeliveredAt time.Time `json:"delivered_at"`
}

// View is what a --view reports: the revision the pod's annotation names
// (want), the one the app's directory holds (running), and the result.
type View struct {
	Ref      string    `json:"ref"`
	Dir      string    `json:"dir,omitempty"`
	Want     string    `json:"want"`
	Running  string    `json:"running"`
	Result   string    `json:"result"`             // applied, pending, rejected or waiting
	Error    string    `json:"error,omitempty"`    // rejected: why; pending: why the last attempt failed, if it did; one line, no content
	Rejected string    `json:"rejected,omitempty"` // rejected: the revision refused
	Reason   string    `json:"reason,omitempty"`   // waiting: what for
	At       time.Time `json:"at"`                 // when the result was reached
}

// Handler serves the metrics of reg at telemetryPath, GET /-/healthy (200
// while the process runs), GET /-/ready (200 while ready returns nil, 503
// with its error otherwise) and GET /-/content (what content and views
// return, as JSON: {"volumes":[{"dir":...,"hash":...,"delivered_at":...}],
// "views":[...]}). content may be nil: then no volume is listed; views may
// be nil: then "views" is left out.
func Handler(reg *prometheus.Registry, telemetryPath string, ready func() error, content func() []Volume, views func() []View) http.Handler {
	mux := newMux("hotreload", reg, telemetryPath, ready)
	mux.HandleFunc("GET /-/content", func(w http.ResponseWriter, r *http.Request) {
		vols := []Volume{}
		if content != nil {
			vols = append(vols, content()...)
		}
		var vs []View
		if views != nil {
			vs = append([]View{}, views()...)
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Volumes []Volume `json:"volumes"`
			Views   []View   `json:"views,omitempty"`
		}{vols, vs})
	})
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<html><head><title>hotreload</title></head><body><h1>hotreload</h1><p><a href=%q>Metrics</a> · <a href="/-/healthy">Healthy</a> · <a href="/-/ready">Ready</a> · <a href="/-/content">Content</a></p></body></html>`+"\n", telemetryPath)
	})
	return mux
}

// Mux serves what every hotreload command serves: the metrics of reg at
// telemetryPath, GET /-/healthy (200 while the process runs) and GET
// /-/ready (200 once ready returns true; 503 before, saying notReady). name
// is the command's, in the answers.
func Mux(name, notReady string, reg *prometheus.Registry, telemetryPath string, ready func() bool) *http.ServeMux {
	return newMux(name, reg, telemetryPath, func() error {
		if !ready() {
			return errors.New(notReady)
		}
		return nil
	})
}

// newMux is Mux with a ready that says why it is not.
func newMux(name string, reg *prometheus.Registry, telemetryPath string, ready func() error) *http.ServeMux {
	mux := http.NewServeMux()
	// Uncompressed: a gzip writer (compress/flate) holds about 0.8 MiB,
	// for an answer of a few KiB, and promhttp's pool of them empties at
	// every other garbage collection, so a scraped sidecar keeps
	// allocating one. What it costs in working set and CPU:
	// BenchmarkMemory in test/cost, docs/performance.md.
	mux.Handle(telemetryPath, promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, DisableCompression: true}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, name+" is healthy.")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, name+" is not ready: "+err.Error()+".", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, name+" is ready.")
	})
	return mux
}

// Server is the HTTP server of the endpoints.
type Server struct {
	logger     log.Logger
	ln         net.Listener
	srv        *http.Server
	errorLog   *serverLog
	configFile string
	tls        *tls.Config // ListenTLS's
}

// Listen binds addr, so that a port in use is an error at start.
func Listen(logger log.Logger, addr string, h http.Handler) (*Server, error) {
	return listen(logger, "--web.listen-address", addr, h)
}

// ListenTLS binds addr, named by flag in errors, for a server that serves
// TLS with cfg (its GetCertificate gives the current certificate at every
// handshake), such as the injector's admission webhook.
func ListenTLS(logger log.Logger, flag, addr string, h http.Handler, cfg *tls.Config) (*Server, error) {
	s, err := listen(logger, flag, addr, h)
	if err != nil {
		return nil, err
	}
	s.tls = cfg
	return s, nil
}

func listen(logger log.Logger, flag, addr string, h http.Handler) (*Server, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	logger = log.With(logger, "component", "web")
	errorLog := newServerLog(logger)
	return &Server{
		logger:   logger,
		ln:       ln,
		errorLog: errorLog,
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          stdlog.New(errorLog, "", 0),
		},
	}, nil
}

// ServeConfigFile makes Run serve TLS and basic auth as the web
// configuration file at path says (the Prometheus exporter-toolkit format,
// read again at every TLS handshake and basic-auth check). "" serves plain
// HTTP. Check the file with CheckConfigFile first.
func (s *Server) ServeConfigFile(path string) { s.configFile = path }

// CheckConfigFile reads the web configuration file at path and its
// certificates, and tells in one line what is wrong with them. A file that
// sets nothing is wrong too: it was meant to turn on TLS or basic auth, and
// would leave the endpoints as open as without it. "" is no file, and fine.
func CheckConfigFile(path string) error {
	if path == "" {
		return nil
	}
	if err := toolkit.Validate(path); err != nil {
		// The YAML parser lists its errors a line each.
		var lines []string
		for l := range strings.Lines(err.Error()) {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		return errors.New(strings.Join(lines, " "))
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var settings map[string]any
	if err := yaml.Unmarshal(b, &settings); err != nil {
		return err
	}
	if len(settings) == 0 {
		return errors.New("sets nothing, so the endpoints would be served as without it: give tls_server_config or basic_auth_users")
	}
	return nil
}

// Run serves until ctx is done.
func (s *Server) Run(ctx context.Context) error {
	level.Info(s.logger).Log("msg", "listening", "address", s.ln.Addr(), "tls", s.configFile != "" || s.tls != nil)
	errc := make(chan error, 1)
	go func() {
		if s.tls != nil {
			errc <- s.srv.Serve(tls.NewListener(s.ln, s.tls))
			return
		}
		errc <- toolkit.Serve(s.ln, s.srv, &toolkit.FlagConfig{WebConfigFile: &s.configFile}, slog.New(toolkitLog{s.logger}))
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
