package e2e

import (
	"net/http"
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
	var p Proc
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

func TestAppDownAndUp(t *testing.T) {
	app := NewApp(t)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	post := func() (int, error) {
		resp, err := client.Post(app.URL("/-/reload"), "", nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(); err != nil || code != http.StatusOK {
		t.Fatalf("POST = %d, %v; want 200", code, err)
	}
	app.Down()
	if _, err := post(); err == nil {
		t.Fatalf("POST to an app that is down succeeded")
	}
	app.Up()
	app.FailNext(1, "bad config")
	if code, _ := post(); code != http.StatusInternalServerError {
		t.Errorf("POST after FailNext = %d, want 500", code)
	}
	if code, _ := post(); code != http.StatusOK {
		t.Errorf("second POST after FailNext(1) = %d, want 200", code)
	}
	if got := app.Count(); got != 3 {
		t.Errorf("Count = %d, want 3 (the refused one is not received)", got)
	}
	if got := app.Completed(http.StatusOK); got != 2 {
		t.Errorf("Completed(200) = %d, want 2", got)
	}
}

// The end-to-end tests and benchmarks must measure the binary that ships.
func TestBuildFlagsMatchMakefile(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GCFLAGS\s*:=[ \t]*(.*?)[ \t]*$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile sets no GCFLAGS")
	}
	if got := string(m[1]); got != GCFlags {
		t.Errorf("Makefile GCFLAGS = %q, internal/e2e builds with %q: keep them equal", got, GCFlags)
	}
}
