// Package cli holds what hotreload's two commands (the sidecar and the
// controller) share in wiring their parts: the logger and the adapter of a
// Run(ctx) part to an oklog/run actor.
package cli

import (
	"context"
	"io"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// NewLogger returns a go-kit logger to w in format ("json" or logfmt) that
// keeps lvl and above, with a UTC timestamp and the caller.
func NewLogger(w io.Writer, format, lvl string) log.Logger {
	var logger log.Logger
	if format == "json" {
		logger = log.NewJSONLogger(log.NewSyncWriter(w))
	} else {
		logger = log.NewLogfmtLogger(log.NewSyncWriter(w))
	}
	// Filter first, then add ts and caller, so that the caller is the line
	// that logged and not the filter.
	logger = level.NewFilter(logger, level.Allow(level.ParseDefault(lvl, level.InfoValue())))
	return log.With(logger, "ts", log.DefaultTimestampUTC, "caller", log.DefaultCaller)
}

// Until adapts a Run(ctx) function to a run.Group actor that is interrupted
// by cancelling its context.
func Until(f func(context.Context) error) (func() error, func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	return func() error { return f(ctx) }, func(error) { cancel() }
}
