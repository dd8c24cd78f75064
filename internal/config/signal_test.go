//go:build linux

package config

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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

// TestSignalReloadHint: the error of a reload that a target built from the
// flags refuses to send comes with advice naming the flag that sends it.
func TestSignalReloadHint(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("no sleep(1): %v", err)
	}
	// sleep neither catches nor ignores SIGHUP, which would kill it.
	name := fmt.Sprintf("hrhint-%d", os.Getpid())
	cmd := &exec.Cmd{Path: sleep, Args: []string{name, "100"}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })

	c, targets, err := parseAll(t, "--volume-dir=/etc/config", "--signal=HUP", "--process-name="+name)
	if err != nil {
		t.Fatal(err)
	}
	err = targets[0].Notify(context.Background())
	if want := fmt.Sprintf("pid %d (sleep) does not handle SIGHUP and would be terminated by it: not sent", cmd.Process.Pid); err == nil || err.Error() != want {
		t.Fatalf("Notify = %v, want %s", err, want)
	}
	if got, want := c.Hint(err), "use --signal-force to send anyway"; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
}

// TestNoProcessHint: no process of the name, and the advice on what the pod
// needs.
func TestNoProcessHint(t *testing.T) {
	name := fmt.Sprintf("hrnone-%d", os.Getpid())
	c, targets, err := parseAll(t, "--volume-dir=/etc/config", "--signal=HUP", "--process-name="+name)
	if err != nil {
		t.Fatal(err)
	}
	err = targets[0].Notify(context.Background())
	if want := "no process named " + name; err == nil || err.Error() != want {
		t.Fatalf("Notify = %v, want %s", err, want)
	}
	if got := c.Hint(err); !strings.Contains(got, "shareProcessNamespace: true") {
		t.Errorf("Hint = %q, want it to name shareProcessNamespace: true", got)
	}
}
