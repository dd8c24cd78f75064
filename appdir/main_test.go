package appdir

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envWriter); dir != "" {
		os.Exit(crashWriter(dir))
	}
	goleak.VerifyTestMain(m)
}
