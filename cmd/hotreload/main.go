// Command hotreload is a sidecar that reloads an app when its mounted
// ConfigMaps, Secrets or directories change, without restarting it. This file
// only wires the parts together; see the watcher, reloader, notifier and
// signal packages for the work.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hotreload/hotreload/internal/cli"
	"github.com/hotreload/hotreload/internal/config"
	"github.com/hotreload/hotreload/internal/footprint"
	"github.com/hotreload/hotreload/internal/version"
	"github.com/hotreload/hotreload/internal/web"
	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/reloader"
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
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	version.Register(reg)

	w, err := config.NewWatcher(logger, reg, cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	state, err := config.OpenStateFile(cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	r := reloader.New(logger, reg, targets, reloader.Options{
		Debounce:      cfg.Debounce,
		Retries:       cfg.Retries,
		Backoff:       notifier.Backoff{Max: cfg.MaxBackoff},
		RetryInterval: cfg.ResyncInterval,
		ProbeInterval: cfg.ProbeInterval,
		ReloadOnStart: cfg.ReloadOnStart,
		ShutdownGrace: cfg.ShutdownGrace,
		Initial:       w.Initial,
		State:         state,
	})
	// Ready: every volume hashed, none missing for long, and the content
	// at start known.
	ready := func() error {
		if err := w.Ready(); err != nil {
			return err
		}
		if !r.Ready() {
			return errors.New("the content at start is not known yet")
		}
		return nil
	}
	srv, err := web.Listen(logger, cfg.ListenAddress, web.Handler(reg, cfg.TelemetryPath, ready, func() []web.Volume {
		var vols []web.Volume
		for _, d := range r.Content() {
			vols = append(vols, web.Volume{Dir: d.Dir, Hash: reloader.ShortHash(d.Hash), DeliveredAt: d.At})
		}
		return vols
	}))
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
	g.Add(cli.Until(func(ctx context.Context) error { return r.Run(ctx, w.Changes()) }))
	g.Add(cli.Until(srv.Run))
	g.Add(cli.Until(func(ctx context.Context) error {
		releaseStartup(ctx, logger, func() bool { return ready() == nil })
		<-ctx.Done()
		return nil
	}))
	if err := g.Run(); err != nil {
		level.Error(logger).Log("msg", "exiting", "err", err)
		return 1
	}
	level.Info(logger).Log("msg", "stopped")
	return 0
}

// releaseStartup waits until start-up is over (ready), then gives back to the kernel the memory that
// only start-up used: see internal/footprint.
func releaseStartup(ctx context.Context, logger log.Logger, ready func() bool) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !ready() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	footprint.Release(func(s footprint.Stats, err error) {
		if err != nil {
			level.Warn(logger).Log("msg", "could not give back all of the start-up memory, running on", "err", err)
		}
		level.Debug(logger).Log("msg", "gave back the start-up memory", "rss_before_kib", s.RSSBefore>>10, "rss_after_kib", s.RSSAfter>>10,
			"file_before_kib", s.FileBefore>>10, "file_after_kib", s.FileAfter>>10, "unmapped_kib", s.Unmapped>>10)
	})
}

// badInput reports a problem found before start, such as a bad flag or a
// port in use, in one line, and returns the exit status for it.
func badInput(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "hotreload: error: %v\n", err)
	return 2
}
