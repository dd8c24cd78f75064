package injector

import (
	"os"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotreload/hotreload/controller/config"
)

// docs/injector.md documents every annotation, flag and metric of the
// injector; this keeps it honest.
func TestDocsListEverything(t *testing.T) {
	b, err := os.ReadFile("../../docs/injector.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, a := range knownAnnotations {
		if strings.HasPrefix(a, "hotreload.dev/nudged") || a == "hotreload.dev/revisions" {
			continue // the controller's, in docs/controller.md and docs/rollout.md
		}
		if !strings.Contains(doc, "| `"+a+"` |") {
			t.Errorf("no row for the annotation %s", a)
		}
	}
	app := kingpin.New("t", "")
	(&config.Config{}).Register(app)
	n := 0
	for _, f := range app.Model().Flags {
		if f.Name == "injector" || strings.HasPrefix(f.Name, "injector.") {
			n++
			if !strings.Contains(doc, "| `--"+f.Name+"` |") {
				t.Errorf("no row for the flag --%s", f.Name)
			}
		}
	}
	if n < 10 {
		t.Errorf("%d injector flags found", n)
	}
	reg := prometheus.NewRegistry()
	newMetrics(reg, func() map[string]int { return map[string]int{"x": 1} }, func() float64 { return 0 })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if !strings.Contains(doc, "`"+mf.GetName()) {
			t.Errorf("no row for the metric %s", mf.GetName())
		}
	}
	if len(mfs) != 6 {
		t.Errorf("%d metrics", len(mfs))
	}
}
