package binary

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func TestListenAddress(t *testing.T) {
	for _, tc := range []struct {
		name, logs, want string
	}{
		{"logfmt", `level=info ts=2026-11-22T13:29:06Z caller=web.go:69 component=web msg=listening address=127.0.0.1:45491` + "\n", "127.0.0.1:45491"},
		{"json", `{"address":"127.0.0.1:9533","caller":"web.go:69","component":"web","level":"info","msg":"listening","ts":"2026-11-22T13:29:06Z"}` + "\n", "127.0.0.1:9533"},
		{"not yet", `level=info msg=starting version=dev` + "\n", ""},
		{"another address", `level=info msg="listening elsewhere" address=1.2.3.4:5` + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listenAddress(tc.logs); got != tc.want {
				t.Errorf("listenAddress = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFires(t *testing.T) {
	var p Process
	p.stderr.Write([]byte(`level=info ts=2026-11-22T13:32:54.545326835Z caller=reloader.go:163 component=reloader msg="content changed, reloading" dirs=/a,/b
level=info ts=2026-11-22T13:32:54.546947711Z caller=reloader.go:269 component=reloader target=http://x/ msg=reloaded attempts=1 duration=1ms
level=info ts=2026-11-22T13:32:55Z caller=reloader.go:163 component=reloader msg="content changed, reloading" dirs=/c
`))
	fires := p.Fires()
	if len(fires) != 2 {
		t.Fatalf("got %d fires, want 2: %+v", len(fires), fires)
	}
	if got := strings.Join(fires[0].Dirs, "|"); got != "/a|/b" {
		t.Errorf("first fire dirs = %q, want /a|/b", got)
	}
	want := time.Date(2026, 11, 22, 13, 32, 54, 545326835, time.UTC)
	if !fires[0].Time.Equal(want) {
		t.Errorf("first fire time = %v, want %v", fires[0].Time, want)
	}
	if got := strings.Join(fires[1].Dirs, "|"); got != "/c" {
		t.Errorf("second fire dirs = %q, want /c", got)
	}
}

func TestValue(t *testing.T) {
	const text = `# TYPE hotreload_reloads_total counter
hotreload_reloads_total{result="success",target="a"} 2
hotreload_reloads_total{result="failure",target="a"} 3
hotreload_reloads_total{result="success",target="b"} 5
# TYPE hotreload_reload_duration_seconds histogram
hotreload_reload_duration_seconds_bucket{target="a",le="+Inf"} 4
hotreload_reload_duration_seconds_sum{target="a"} 0.5
hotreload_reload_duration_seconds_count{target="a"} 4
`
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
		ok     bool
	}{
		{"one series", "hotreload_reloads_total", map[string]string{"result": "failure", "target": "a"}, 3, true},
		{"sum over targets", "hotreload_reloads_total", map[string]string{"result": "success"}, 7, true},
		{"every series", "hotreload_reloads_total", nil, 10, true},
		{"no such series", "hotreload_reloads_total", map[string]string{"target": "c"}, 0, false},
		{"no such metric", "hotreload_nothing", nil, 0, false},
		{"histogram counts", "hotreload_reload_duration_seconds", map[string]string{"target": "a"}, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Value(mfs, tc.metric, tc.labels)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Value = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// The end-to-end tests and benchmarks must measure the binary that ships.
func TestBuildFlagsMatchMakefile(t *testing.T) {
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	gobuild := regexp.MustCompile(`(?m)^GOBUILD\s*:=.*$`).Find(mk)
	if gobuild == nil {
		t.Fatal("the Makefile sets no GOBUILD")
	}
	for _, flag := range []string{"-trimpath", "-ldflags"} {
		if !strings.Contains(string(gobuild), flag) {
			t.Errorf("the Makefile's GOBUILD has no %s, which test/support/binary builds with: %s", flag, gobuild)
		}
	}
	if strings.Contains(string(gobuild), "-gcflags") {
		t.Errorf("the Makefile's GOBUILD sets -gcflags, which test/support/binary does not: %s", gobuild)
	}
	// The Makefile may name the package through a variable; what matters is
	// that it sets the same package's Version and Revision.
	if !strings.Contains(string(mk), VersionPackage) || !regexp.MustCompile(`(?m)^LDFLAGS\s*:=.*\.Version=.*\.Revision=`).Match(mk) {
		t.Errorf("the Makefile's LDFLAGS do not set %s.Version and .Revision, which test/support/binary sets", VersionPackage)
	}
}

func TestLDFlags(t *testing.T) {
	if got, want := LDFlags("v1", "abc"), "-s -w -X "+VersionPackage+".Version=v1 -X "+VersionPackage+".Revision=abc"; got != want {
		t.Errorf("LDFlags = %q, want %q", got, want)
	}
	if got := LDFlags("demo", ""); strings.Contains(got, "Revision") {
		t.Errorf("LDFlags without a revision = %q, want go build's VCS revision left alone", got)
	}
}
