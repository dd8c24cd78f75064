package main

import (
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/go-logr/logr"
)

// klogLogger sends client-go's klog output (leader election, watch errors)
// to a go-kit logger: klog's verbose levels become debug, its info info,
// its errors error.
func klogLogger(l log.Logger) logr.Logger { return logr.New(&klogSink{l: l}) }

type klogSink struct {
	l    log.Logger
	name string
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(int) bool { return true }

func (s *klogSink) Info(lvl int, msg string, kv ...any) {
	lg := level.Info(s.l)
	if lvl > 0 {
		lg = level.Debug(s.l)
	}
	lg.Log(append([]any{"msg", msg}, kv...)...)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	level.Error(s.l).Log(append([]any{"msg", msg, "err", err}, kv...)...)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{l: log.With(s.l, kv...), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &klogSink{l: log.With(s.l, "logger", name), name: name}
}
