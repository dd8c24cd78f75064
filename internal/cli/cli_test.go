package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-kit/log/level"
)

func TestNewLogger(t *testing.T) {
	for _, tt := range []struct {
		format, lvl string
		want        string
	}{
		{"logfmt", "info", `level=info ts=`},
		{"json", "info", `"level":"info"`},
	} {
		var buf bytes.Buffer
		logger := NewLogger(&buf, tt.format, tt.lvl)
		level.Debug(logger).Log("msg", "hidden")
		level.Info(logger).Log("msg", "shown")
		out := buf.String()
		if strings.Contains(out, "hidden") || !strings.Contains(out, "shown") || !strings.Contains(out, tt.want) || !strings.Contains(out, "cli_test.go") {
			t.Errorf("%s at %s: %q", tt.format, tt.lvl, out)
		}
	}
}

func TestUntil(t *testing.T) {
	errStopped := errors.New("stopped")
	execute, interrupt := Until(func(ctx context.Context) error {
		<-ctx.Done()
		return errStopped
	})
	done := make(chan error, 1)
	go func() { done <- execute() }()
	interrupt(nil)
	if err := <-done; !errors.Is(err, errStopped) {
		t.Fatalf("execute returned %v after interrupt", err)
	}
}
