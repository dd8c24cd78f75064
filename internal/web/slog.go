package web

import (
	"context"
	"log/slog"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

// toolkitLog passes exporter-toolkit's slog records to the go-kit logger.
// Its info records ("Listening on", "TLS is enabled.") repeat the "listening"
// line of Run, so they go out at debug; its warnings and errors (a failed TLS
// handshake, a bad password) keep their level.
type toolkitLog struct{ logger log.Logger }

func (h toolkitLog) Enabled(context.Context, slog.Level) bool { return true }

func (h toolkitLog) Handle(_ context.Context, r slog.Record) error {
	kv := make([]any, 0, 2+2*r.NumAttrs())
	kv = append(kv, "msg", r.Message)
	r.Attrs(func(a slog.Attr) bool {
		kv = append(kv, a.Key, a.Value.Resolve().Any())
		return true
	})
	var l log.Logger
	switch {
	case r.Level >= slog.LevelError:
		l = level.Error(h.logger)
	case r.Level >= slog.LevelWarn:
		l = level.Warn(h.logger)
	default:
		l = level.Debug(h.logger)
	}
	return l.Log(kv...)
}

func (h toolkitLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	kv := make([]any, 0, 2*len(attrs))
	for _, a := range attrs {
		kv = append(kv, a.Key, a.Value.Resolve().Any())
	}
	return toolkitLog{log.With(h.logger, kv...)}
}

// WithGroup is not used by exporter-toolkit; a group's attributes are kept
// without the group's name.
func (h toolkitLog) WithGroup(string) slog.Handler { return h }
