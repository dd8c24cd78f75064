package notifier

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestOptionError(t *testing.T) {
	flags := map[string]string{"URL": "--webhook-url", "CAFile": "--webhook-ca-file"}
	name := func(f string) string { return flags[f] }
	for _, tt := range []struct {
		name            string
		err             error
		library, caller string
	}{
		{"one option", NewOptionError("{URL} %q: no host", "http:///x"),
			`URL "http:///x": no host`, `--webhook-url "http:///x": no host`},
		{"an option the caller does not name", NewOptionError("{URL} and {KeyFile}"),
			"URL and KeyFile", "--webhook-url and KeyFile"},
		{"a value that looks like a placeholder stays", NewOptionError("{URL} %q", "{CAFile}"),
			`URL "{CAFile}"`, `--webhook-url "{CAFile}"`},
		{"wrapped in other text", fmt.Errorf("reload: %w", NewOptionError("trust it with {CAFile}")),
			"reload: trust it with CAFile", "reload: trust it with --webhook-ca-file"},
		{"joined", errors.Join(errors.New("first"), fmt.Errorf("second: %w", NewOptionError("{URL} x"))),
			"first\nsecond: URL x", "first\nsecond: --webhook-url x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.library {
				t.Errorf("Error() = %q, want %q", got, tt.library)
			}
			if got := Explain(tt.err, name); got != tt.caller {
				t.Errorf("Explain = %q, want %q", got, tt.caller)
			}
		})
	}
	t.Run("unwraps its cause", func(t *testing.T) {
		err := NewOptionError("{CAFile} %s: %w", "/ca.pem", fs.ErrNotExist)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("errors.Is(%v, fs.ErrNotExist) = false", err)
		}
	})
	t.Run("a plain error is left as it is", func(t *testing.T) {
		if got := Explain(errors.New("{URL}"), name); got != "{URL}" {
			t.Errorf("Explain = %q", got)
		}
	})
}
