//go:build linux

package config

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func TestSignalErrorsNameFlags(t *testing.T) {
	vol := "--volume-dir=" + t.TempDir()
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown signal", []string{vol, "--signal=SIGFOO", "--process-name=nginx"}, `--signal "SIGFOO": unknown signal`},
		{"no process", []string{vol, "--signal=HUP"}, "one of --process-name, --process-cmdline, --pid-file is required with --signal"},
		{"bad regexp", []string{vol, "--signal=HUP", "--process-cmdline=nginx: (master"}, "--process-cmdline: error parsing regexp: missing closing ): `nginx: (master`"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseAll(t, tt.args...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v,\nwant %s", err, tt.want)
			}
		})
	}
}

// A reload's error names the flag too: it is logged for the user.
func TestSignalReloadErrorNamesFlag(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "app.pid")
	_, targets, err := parseAll(t, "--volume-dir=/etc/config", "--signal=HUP", "--pid-file="+pidFile)
	if err != nil {
		t.Fatal(err)
	}
	err = targets[0].Notify(context.Background())
	if want := "read --pid-file: open " + pidFile; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Notify = %v, want an error containing %q", err, want)
	}
}
