// Command hotreload is a sidecar that reloads an app when its mounted
// ConfigMaps, Secrets or directories change, without restarting it. This file
// only wires the parts together; see the watcher, reloader, notifier and
// procsignal packages for the work.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/go-kit/log/level"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hotreload/hotreload/internal/cli"
	"github.com/hotreload/hotreload/internal/config"
	"github.com/hotreload/hotreload/internal/processmetrics"
	"github.com/hotreload/hotreload/internal/version"
	"github.com/hotreload/hotreload/internal/web"
	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/reloader"
	"github.com/hotreload/hotreload/view"
)

func main() { os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr)) }

func runMain(args []string, stdout, stderr io.Writer) int {
	cfg, err := config.Parse(args, version.String(), stdout, os.Exit)
	if err != nil {
		return badInput(stderr, err)
	}
	targets, err := config.NewTargets(cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	logger := cli.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		processmetrics.New(),
	)
	version.Register(reg)

	w, err := config.NewWatcher(logger, reg, cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	key, err := config.ContentKey(cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	state, err := config.OpenStateFile(cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	if state != nil {
		defer state.Close()
	}
	views, err := config.NewViews(logger, reg, cfg, key)
	if err != nil {
		return badInput(stderr, err)
	}
	opts := reloader.Options{
		Debounce:       cfg.Debounce,
		Retries:        cfg.Retries,
		Backoff:        notifier.Backoff{Max: cfg.MaxBackoff},
		RefusedBackoff: notifier.Backoff{Max: cfg.RefusedMaxBackoff},
		RetryInterval:  cfg.ResyncInterval,
		ProbeInterval:  cfg.ProbeInterval,
		ReloadOnStart:  cfg.ReloadOnStart,
		ShutdownGrace:  cfg.ShutdownGrace,
		Initial:        w.Initial,
		State:          state,
		Hint:           cfg.Hint,
		Key:            key,
		Sensitive:      config.MayHoldSecret,
	}
	changes, viewStatus := w.Changes(), (func() []web.View)(nil)
	if views != nil {
		// The views sit between the watcher and the reloader: they write
		// the app's directories, and the reloader delivers those.
		opts.Initial, opts.Delivered, opts.Refused = views.Initial, views.Delivered, views.Refused
		opts.Sensitive = func(dir string) bool {
			if s, ok := views.Sensitive(dir); ok {
				return s
			}
			return config.MayHoldSecret(dir)
		}
		changes, viewStatus = views.Changes(), func() []web.View { return webViews(views.Views()) }
	}
	r := reloader.New(logger, reg, targets, opts)
	// Ready: every volume hashed, none missing for long, and the content
	// at start known.
	ready := func() error {
		if err := w.Ready(); err != nil {
			return err
		}
		for _, t := range targets {
			if d, ok := t.(interface{ Draining() bool }); ok && d.Draining() {
				return fmt.Errorf("draining: %s restarts the app's container (--restart-drain)", t.Name())
			}
		}
		if !r.Ready() {
			return errors.New("the content at start is not known yet")
		}
		return nil
	}
	srv, err := web.Listen(logger, cfg.ListenAddress, web.Handler(reg, cfg.TelemetryPath, ready, func() []web.Volume {
		var vols []web.Volume
		for _, d := range r.Content() {
			vols = append(vols, web.Volume{Dir: d.Dir, Hash: d.Value, DeliveredAt: d.At})
		}
		return vols
	}, viewStatus))
	if err != nil {
		return badInput(stderr, err)
	}
	srv.ServeConfigFile(cfg.WebConfigFile)

	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.Name()
	}
	level.Info(logger).Log("msg", "starting", "version", version.Version, "revision", version.Revision,
		"volumes", strings.Join(cfg.VolumeDirs, ","), "optional_volumes", strings.Join(cfg.OptionalDirs, ","), "targets", strings.Join(names, ","))
	if state == nil {
		level.Info(logger).Log("msg", "no --state-file: a change made while hotreload is not running (a restart, a crash) cannot be detected; mount an emptyDir and set --state-file to a file in it")
	}

	var g run.Group
	onSignal, stopSignal := run.SignalHandler(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	g.Add(func() error {
		err := onSignal()
		if sig := (*run.SignalError)(nil); errors.As(err, &sig) {
			level.Info(logger).Log("msg", "shutting down", "signal", sig.Signal)
			return nil // a requested stop, not a failure
		}
		return err
	}, stopSignal)
	g.Add(cli.Until(w.Run))
	if views != nil {
		g.Add(cli.Until(func(ctx context.Context) error { return views.Run(ctx, w.Changes(), w.Initial) }))
	}
	g.Add(cli.Until(func(ctx context.Context) error { return r.Run(ctx, changes) }))
	g.Add(cli.Until(srv.Run))
	if err := g.Run(); err != nil {
		level.Error(logger).Log("msg", "exiting", "err", err)
		return 1
	}
	level.Info(logger).Log("msg", "stopped")
	return 0
}

// webViews is what /-/content says of the views.
func webViews(vs []view.Status) []web.View {
	out := make([]web.View, len(vs))
	for i, v := range vs {
		out[i] = web.View{Ref: v.Ref, Dir: v.Dir, Want: v.Want, Running: v.Running, Result: v.Result,
			Error: v.Error, Rejected: v.Refused, Reason: v.Reason, At: v.At}
	}
	return out
}

// badInput reports a problem found before start, such as a bad flag or a
// port in use, in one line, and returns the exit status for it.
func badInput(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "hotreload: error: %v\n", err)
	return 2
}
