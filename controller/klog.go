package controller

import (
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/go-logr/logr"
)

// KlogLogger sends client-go's klog output to a go-kit logger: klog's
// verbose levels become debug, its info info, its errors error. Give it to
// klog.SetLogger for what client-go logs outside the controller's calls;
// within them (informers, leader election) the controller passes client-go
// a logger of its own that logs at debug only, since it reports failing
// calls itself, once and rate-limited.
func KlogLogger(l log.Logger) logr.Logger { return logr.New(&klogSink{l: l}) }

// clientGoLogger is the logger that Run gives client-go through its
// context: every line at debug.
func clientGoLogger(l log.Logger) logr.Logger {
	return logr.New(&klogSink{l: log.With(l, "component", "client-go"), debug: true})
}

type klogSink struct {
	l     log.Logger
	name  string
	debug bool // every line at debug
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(int) bool { return true }

func (s *klogSink) Info(lvl int, msg string, kv ...any) {
	lg := level.Info(s.l)
	if lvl > 0 || s.debug {
		lg = level.Debug(s.l)
	}
	lg.Log(append([]any{"msg", msg}, kv...)...)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	lg := level.Error(s.l)
	if s.debug {
		lg = level.Debug(s.l)
	}
	lg.Log(append([]any{"msg", msg, "err", err}, kv...)...)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{l: log.With(s.l, kv...), name: s.name, debug: s.debug}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &klogSink{l: log.With(s.l, "logger", name), name: name, debug: s.debug}
}
