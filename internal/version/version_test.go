package version

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
)

func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	Register(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "hotreload_build_info" || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gathered %v, want one hotreload_build_info series", mfs)
	}
	m := mfs[0].GetMetric()[0]
	if v := m.GetGauge().GetValue(); v != 1 {
		t.Errorf("value %v, want 1", v)
	}
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	for name, want := range map[string]string{"version": version.Version, "revision": version.GetRevision(), "goversion": version.GoVersion} {
		if labels[name] != want {
			t.Errorf("label %s = %q, want %q", name, labels[name], want)
		}
	}
}

func TestString(t *testing.T) {
	if s := String(); !strings.HasPrefix(s, "hotreload, version "+version.Version+" (") {
		t.Errorf("String() = %q, want it to start with the program and the version", s)
	}
}
