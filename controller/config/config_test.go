package config

import (
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

func inPod(string) ([]byte, error)      { return []byte("hotreload-system\n"), nil }
func outsidePod(string) ([]byte, error) { return nil, errors.New("no such file") }
func host() (string, error)             { return "hotreload-controller-7d9f-abc", nil }
func noHost() (string, error)           { return "", errors.New("no host name") }
func parseIn(args ...string) (*Config, error) {
	return parse(args, "v", io.Discard, func(int) {}, inPod, host)
}

func TestDefaults(t *testing.T) {
	c, err := parseIn()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		QPS: 50, Burst: 100, Workers: 2, WatchSecrets: true, Coalesce: 300 * time.Millisecond,
		LeaderElect: true, LeaseName: "hotreload-controller", LeaseNamespace: "hotreload-system", Identity: "hotreload-controller-7d9f-abc",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		Rollouts: true, RolloutWorkers: 4, ScrapeTimeout: 2 * time.Second,
		ListenAddress: ":9534", TelemetryPath: "/metrics", LogLevel: "info", LogFormat: "logfmt",
		Injector: Injector{
			ListenAddress: ":8443", NativeSidecars: "auto", ContentKey: "create", ContentKeySecret: "hotreload-content-key",
			Certs: "self", CertSecret: "hotreload-injector-tls", Webhook: "hotreload-injector", Service: "hotreload-injector",
			CertValidity: 720 * time.Hour, CAValidity: 8760 * time.Hour, CertOverlap: 2 * time.Minute,
		},
	}
	if c.Namespaces != nil {
		t.Errorf("namespaces = %q, want none (the whole cluster)", c.Namespaces)
	}
	c.Namespaces = nil
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *c, want)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("HOTRELOAD_NAMESPACE", "a\nb")
	t.Setenv("HOTRELOAD_LEADER_ELECT", "false")
	t.Setenv("HOTRELOAD_WEB_LISTEN_ADDRESS", ":9999")
	t.Setenv("HOTRELOAD_WATCH_SECRETS", "false")
	t.Setenv("HOTRELOAD_COALESCE", "0s")
	c, err := parse(nil, "v", io.Discard, func(int) {}, outsidePod, noHost)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Namespaces, ",") != "a,b" || c.LeaderElect || c.ListenAddress != ":9999" || c.WatchSecrets || c.Coalesce != 0 {
		t.Errorf("from the environment: %+v", c)
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	app := kingpin.New("t", "")
	(&Config{}).Register(app)
	for _, f := range app.Model().Flags {
		if f.Envar == "" && (strings.HasPrefix(f.Name, "help") || strings.HasPrefix(f.Name, "completion")) {
			continue // kingpin's own
		}
		want := "HOTRELOAD_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(f.Name))
		if f.Envar != want {
			t.Errorf("--%s: environment variable %q, want %q", f.Name, f.Envar, want)
		}
	}
}

// docs/flags.md documents every flag of the controller (the injector's are
// in docs/injector.md, which controller/injector's test checks).
func TestDocsListEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	app := kingpin.New("t", "")
	(&Config{}).Register(app)
	for _, f := range app.Model().Flags {
		if f.Hidden || f.Name == "help" || f.Name == "version" || f.Name == "injector" || strings.HasPrefix(f.Name, "injector.") {
			continue
		}
		row := "| `--" + f.Name + "` | "
		if len(f.Default) > 0 {
			row += "`" + strings.Join(f.Default, ",") + "` |"
		}
		if !strings.Contains(doc, row) {
			t.Errorf("docs/flags.md has no row %q for the controller's --%s", row, f.Name)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		outside bool
		want    string
	}{
		{"empty namespace", []string{"--namespace", ""}, false, `--namespace "": must not be empty`},
		{"zero qps", []string{"--qps", "0"}, false, "--qps 0: must be positive"},
		{"zero burst", []string{"--burst", "0"}, false, "--burst 0: must be at least 1"},
		{"no workers", []string{"--workers", "0"}, false, "--workers 0: want 1 to 100"},
		{"negative coalesce", []string{"--coalesce=-1s"}, false, "--coalesce -1s: want 0 to 10s"},
		{"long coalesce", []string{"--coalesce", "1m"}, false, "--coalesce 1m0s: want 0 to 10s"},
		{"too many workers", []string{"--workers", "1000"}, false, "--workers 1000: want 1 to 100"},
		{"no rollout workers", []string{"--rollout.workers", "0"}, false, "--rollout.workers 0: want 1 to 100"},
		{"scrape timeout too short", []string{"--rollout.scrape-timeout", "1ms"}, false, "--rollout.scrape-timeout 1ms: want 100ms to 1m"},
		{"test content URL", []string{"--test.content-url", "stub:1"}, false, "--test.content-url \"stub:1\": want an http or https URL"},
		{"empty lease name", []string{"--leader-elect.lease-name", ""}, false, "--leader-elect.lease-name"},
		{"renew deadline too short", []string{"--leader-elect.renew-deadline", "2s"}, false, "--leader-elect.renew-deadline 2s: must be more than 1.2 times --leader-elect.retry-period 2s"},
		{"lease shorter than renewal", []string{"--leader-elect.lease-duration", "5s"}, false, "--leader-elect.lease-duration 5s: must be more than --leader-elect.renew-deadline 10s"},
		{"no retry period", []string{"--leader-elect.retry-period", "0s"}, false, "--leader-elect.retry-period 0s: must be positive"},
		{"lease namespace outside a pod", nil, true, "--leader-elect.lease-namespace is required outside a pod"},
		{"bad listen address", []string{"--web.listen-address", "9534"}, false, `--web.listen-address "9534": want host:port`},
		{"metrics under /-/", []string{"--web.telemetry-path", "/-/metrics"}, false, "--web.telemetry-path"},
		{"bad log level", []string{"--log.level", "loud"}, false, `--log.level "loud": want debug, info, warn or error`},
		{"bad log format", []string{"--log.format", "xml"}, false, `--log.format "xml": want logfmt or json`},
		{"injector without an image", []string{"--injector"}, false, "--injector.image is required: this build (version none) is not a release"},
		{"injector on the metrics port", []string{"--injector", "--injector.image=x", "--injector.listen-address=:9534"}, false, "--injector.listen-address :9534: the same as --web.listen-address"},
		{"injector address", []string{"--injector", "--injector.image=x", "--injector.listen-address=8443"}, false, `--injector.listen-address "8443": want host:port`},
		{"injector outside a pod", []string{"--injector", "--injector.image=x", "--no-leader-elect"}, true, "--injector.namespace is required outside a pod"},
		{"injector native sidecars", []string{"--injector.native-sidecars=maybe"}, false, `--injector.native-sidecars "maybe": want auto, true, false`},
		{"injector certs", []string{"--injector.certs=cert-manager"}, false, `--injector.certs "cert-manager": want self, external`},
		{"injector empty secret", []string{"--injector", "--injector.image=x", "--injector.cert-secret="}, false, `--injector.cert-secret "": must not be empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := inPod
			if tt.outside {
				read = outsidePod
			}
			_, err := parse(tt.args, "v", io.Discard, func(int) {}, read, host)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line with %q", err, tt.want)
			}
		})
	}
}

func TestWithoutLeaderElectionNeedsNoPod(t *testing.T) {
	c, err := parse([]string{"--no-leader-elect", "--namespace", "a", "--namespace", "b"}, "v", io.Discard, func(int) {}, outsidePod, noHost)
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaderElect || strings.Join(c.Namespaces, ",") != "a,b" {
		t.Errorf("got %+v", c)
	}
}

func TestIdentityAndNamespaceFlagsWin(t *testing.T) {
	c, err := parse([]string{"--leader-elect.lease-namespace", "ops", "--leader-elect.identity", "me"}, "v", io.Discard, func(int) {}, outsidePod, noHost)
	if err != nil {
		t.Fatal(err)
	}
	if c.LeaseNamespace != "ops" || c.Identity != "me" {
		t.Errorf("got %+v", c)
	}
}

func TestInjector(t *testing.T) {
	c, err := parseIn("--injector", "--injector.image=registry.example.com/hotreload:v1", "--injector.exclude-namespace=ci")
	if err != nil {
		t.Fatal(err)
	}
	i := c.Injector
	if !i.Enabled || i.Image != "registry.example.com/hotreload:v1" || i.Namespace != "hotreload-system" || strings.Join(i.ExcludeNamespaces, ",") != "ci" {
		t.Errorf("%+v", i)
	}
	for v, release := range map[string]bool{"v0.1.0": true, "v1.2.3-rc.1": true, "dev": false, "v0.1.0-3-gabc123-dirty": false, "abc123": false} {
		if got := releaseVersion.MatchString(v); got != release {
			t.Errorf("%s: release %v, want %v", v, got, release)
		}
	}
}
