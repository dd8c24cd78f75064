package cost

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	execInCgroup()
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
