package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/hotreload/hotreload/test/support/e2etest"
)

// TestMain runs hotreload itself when the end-to-end tests re-execute this
// test binary as hotreload (e2etest.RunMain), so that they test a
// race-instrumented hotreload. Otherwise it runs the tests, checks that no
// goroutine of the harness (process waiters, log copiers, test servers,
// HTTP clients) outlives them, and removes the release binary that the
// benchmarks built.
func TestMain(m *testing.M) {
	e2etest.RunMain(main)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		e2etest.Cleanup()
		os.Exit(code)
	}))
}
