// Package version is hotreload's build identity. It is kept by
// github.com/prometheus/common/version, as in every Prometheus component, so
// --version and hotreload_build_info look like theirs. The linker sets it
// (LDFLAGS in the Makefile):
//
//	-X github.com/prometheus/common/version.Version=v1.0.0
//	-X github.com/prometheus/common/version.Revision=abc123
//
// Without -X, Version is empty and Revision is the VCS revision that go
// build recorded.
package version

import (
	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

// Version and Revision are the build's, read from prometheus/common/version
// when the program starts.
var (
	Version  = version.Version
	Revision = version.GetRevision()
)

// String is what hotreload --version prints: version.Print("hotreload").
func String() string { return version.Print("hotreload") }

// Register adds hotreload_build_info to reg: always 1, labelled with the
// version, revision, branch, Go version, OS and architecture.
func Register(reg prometheus.Registerer) {
	reg.MustRegister(versioncollector.NewCollector("hotreload"))
}
