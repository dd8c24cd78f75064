//go:build linux

package procsignal

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// Environment of the test binary when it runs as something else than the
// test suite.
const (
	// envHelper makes the test binary a target process (helperCatch,
	// helperTree) instead of running tests.
	envHelper = "HOTRELOAD_SIGNAL_TEST_HELPER"
	// envDir is where a target process writes its ready.<pid> file and
	// appends "hup <pid>" lines to hup.log.
	envDir = "HOTRELOAD_SIGNAL_TEST_DIR"

	helperCatch = "catch" // catch SIGHUP and log it
	helperTree  = "tree"  // start two helperCatch workers, then catch like them
	// helperRespawn starts two helperCatch workers and, on each SIGHUP,
	// starts two new ones and kills the old, as nginx does on a reload.
	helperRespawn = "respawn"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envRestartHelper); mode != "" {
		os.Exit(runRestartHelper(mode))
	}
	if mode := os.Getenv(envHelper); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(envDir)))
	}
	goleak.VerifyTestMain(m)
}

// runHelper is the main function of a target process. It never returns
// unless it fails; the test kills it.
func runHelper(mode, dir string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "helper %s: %v\n", mode, err)
		return 3
	}
	hups := make(chan os.Signal, 16)
	signal.Notify(hups, syscall.SIGHUP)
	var workers []*exec.Cmd
	startWorkers := func() error {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		for range 2 {
			w := &exec.Cmd{
				Path:   exe,
				Args:   []string{os.Args[0], "worker"},
				Env:    append(os.Environ(), envHelper+"="+helperCatch),
				Stderr: os.Stderr,
			}
			if err := w.Start(); err != nil {
				return err
			}
			workers = append(workers, w)
		}
		return nil
	}
	switch mode {
	case helperTree, helperRespawn:
		if err := startWorkers(); err != nil {
			return fail(err)
		}
	case helperCatch:
	default:
		return fail(fmt.Errorf("unknown mode"))
	}
	pid := strconv.Itoa(os.Getpid())
	if err := os.WriteFile(filepath.Join(dir, "ready."+pid), nil, 0o644); err != nil {
		return fail(err)
	}
	for range hups {
		if mode == helperRespawn {
			old := workers
			workers = nil
			if err := startWorkers(); err != nil {
				return fail(err)
			}
			for _, w := range old {
				_ = w.Process.Kill()
				_ = w.Wait()
			}
		}
		f, err := os.OpenFile(filepath.Join(dir, "hup.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fail(err)
		}
		_, err = f.WriteString("hup " + pid + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fail(err)
		}
	}
	return 0
}
