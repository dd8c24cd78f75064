// Package version holds the build's identity, set by the linker:
//
//	-X github.com/hotreload/hotreload/internal/version.Version=v1.0.0
//	-X github.com/hotreload/hotreload/internal/version.Revision=abc123
package version

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Set by -ldflags -X at build time.
var (
	Version  = "dev"
	Revision = "unknown"
)

// String is the line --version prints.
func String() string {
	return "hotreload " + Version + " (revision " + Revision + ", " + runtime.Version() + ")"
}

// Register adds hotreload_build_info to reg.
func Register(reg prometheus.Registerer) {
	promauto.With(reg).NewGaugeVec(prometheus.GaugeOpts{
		Name: "hotreload_build_info",
		Help: "Always 1; the labels tell the version, the revision and the Go version it was built with.",
	}, []string{"version", "revision", "goversion"}).WithLabelValues(Version, Revision, runtime.Version()).Set(1)
}
