package config

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/hotreload/hotreload/notifier"
)

func parse(t *testing.T, args ...string) (*Config, error) {
	t.Helper()
	var out bytes.Buffer
	return Parse(args, "test", &out, func(int) { t.Fatalf("terminated; output:\n%s", out.String()) })
}

// parseAll is what hotreload does with its command line at start: Parse,
// then NewTargets.
func parseAll(t *testing.T, args ...string) (*Config, []notifier.Target, error) {
	t.Helper()
	c, err := parse(t, args...)
	if err != nil {
		return nil, nil, err
	}
	targets, err := NewTargets(c)
	return c, targets, err
}

func TestDefaults(t *testing.T) {
	c, targets, err := parseAll(t, "--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload")
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"debounce", c.Debounce, 100 * time.Millisecond},
		{"resync", c.ResyncInterval, 2 * time.Minute},
		{"poll", c.PollInterval, 5 * time.Second},
		{"method", c.Webhook.Method, "POST"},
		{"status codes", strings.Join(c.Webhook.StatusCodes, ","), "200"},
		{"retries", c.Retries, 0},
		{"timeout", c.Webhook.Timeout, 30 * time.Second},
		{"max backoff", c.MaxBackoff, 5 * time.Second},
		{"refused max backoff", c.RefusedMaxBackoff, 5 * time.Minute},
		{"listen", c.ListenAddress, ":9533"},
		{"telemetry", c.TelemetryPath, "/metrics"},
		{"reload on start", c.ReloadOnStart, false},
		{"targets", len(targets), 1},
	}
	for _, ck := range checks {
		if ck.got != ck.want {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

// The command line the Prometheus and Alertmanager charts give
// configmap-reload must work unchanged, with the same meaning.
func TestConfigmapReloadCommandLine(t *testing.T) {
	c, targets, err := parseAll(t,
		"--volume-dir=/etc/config", "--volume-dir=/etc/secrets",
		"--webhook-url=http://127.0.0.1:9090/-/reload", "--webhook-url=http://127.0.0.1:9093/-/reload",
		"--webhook-method=PUT", "--webhook-status-code=204", "--webhook-retries=3",
		"--web.listen-address=:8080", "--web.telemetry-path=/custom",
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.VolumeDirs, ","); got != "/etc/config,/etc/secrets" {
		t.Errorf("volume dirs = %s", got)
	}
	if len(targets) != 2 || targets[0].Name() != "http://127.0.0.1:9090/-/reload" || targets[1].Name() != "http://127.0.0.1:9093/-/reload" {
		t.Errorf("targets = %v, want the two URLs", targets)
	}
	if c.Webhook.Method != "PUT" || strings.Join(c.Webhook.StatusCodes, ",") != "204" || c.Retries != 3 || c.ListenAddress != ":8080" || c.TelemetryPath != "/custom" {
		t.Errorf("config = %+v", c)
	}
}

// configmapReloadFlags is configmap-reload's command line as it declares
// it, with Go's flag package: the names, and the types that decide how Go
// parses a value. A command line that this set takes is one that users'
// manifests may hold.
func configmapReloadFlags() (*flag.FlagSet, *configmapReloadValues) {
	v := &configmapReloadValues{}
	fs := flag.NewFlagSet("configmap-reload", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("volume-dir", "the config map volume directory to watch for updates; may be used multiple times", func(s string) error {
		v.volumeDirs = append(v.volumeDirs, s)
		return nil
	})
	fs.Func("webhook-url", "the url to send a request to when the specified config map volume directory has been updated", func(s string) error {
		v.webhookURLs = append(v.webhookURLs, s)
		return nil
	})
	fs.StringVar(&v.method, "webhook-method", "POST", "the HTTP method url to use to send the webhook")
	fs.IntVar(&v.statusCode, "webhook-status-code", 200, "the HTTP status code indicating successful triggering of reload")
	fs.IntVar(&v.retries, "webhook-retries", 1, "the amount of times to retry the webhook reload request")
	fs.StringVar(&v.listen, "web.listen-address", ":9533", "address to listen on for web interface and telemetry")
	fs.StringVar(&v.telemetry, "web.telemetry-path", "/metrics", "path under which to expose metrics")
	return fs, v
}

type configmapReloadValues struct {
	volumeDirs, webhookURLs []string
	method                  string
	statusCode, retries     int
	listen, telemetry       string
}

// Manifests written for configmap-reload keep working: every spelling of
// its flags that Go's flag package takes (one dash or two, the value after
// "=" or as the next argument) parses to the same values here.
func TestConfigmapReloadGoFlags(t *testing.T) {
	tests := map[string][]string{
		"one dash, =": {
			"-volume-dir=/etc/config", "-volume-dir=/etc/secrets",
			"-webhook-url=http://127.0.0.1:9090/-/reload", "-webhook-url=http://127.0.0.1:9093/-/reload",
			"-webhook-method=PUT", "-webhook-status-code=204", "-webhook-retries=3",
			"-web.listen-address=:8080", "-web.telemetry-path=/custom",
		},
		"one dash, separate values": {
			"-volume-dir", "/etc/config", "-volume-dir", "/etc/secrets",
			"-webhook-url", "http://127.0.0.1:9090/-/reload", "-webhook-url", "http://127.0.0.1:9093/-/reload",
			"-webhook-method", "PUT", "-webhook-status-code", "204", "-webhook-retries", "3",
			"-web.listen-address", ":8080", "-web.telemetry-path", "/custom",
		},
		"two dashes, mixed": {
			"--volume-dir", "/etc/config", "-volume-dir=/etc/secrets",
			"--webhook-url=http://127.0.0.1:9090/-/reload", "-webhook-url", "http://127.0.0.1:9093/-/reload",
			"--webhook-method", "PUT", "-webhook-status-code=204", "--webhook-retries=3",
			"-web.listen-address", ":8080", "--web.telemetry-path=/custom",
		},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			fs, want := configmapReloadFlags()
			if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
				t.Fatalf("configmap-reload's flag set refuses %q (%v, %d left): the test's command line is wrong", args, err, fs.NArg())
			}
			c, targets, err := parseAll(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			checks := []struct {
				name      string
				got, want any
			}{
				{"volume dirs", strings.Join(c.VolumeDirs, ","), strings.Join(want.volumeDirs, ",")},
				{"webhook urls", strings.Join(c.WebhookURLs, ","), strings.Join(want.webhookURLs, ",")},
				{"method", c.Webhook.Method, want.method},
				{"status codes", strings.Join(c.Webhook.StatusCodes, ","), strconv.Itoa(want.statusCode)},
				{"retries", c.Retries, want.retries},
				{"listen", c.ListenAddress, want.listen},
				{"telemetry", c.TelemetryPath, want.telemetry},
				{"targets", len(targets), len(want.webhookURLs)},
			}
			for _, ck := range checks {
				if ck.got != ck.want {
					t.Errorf("%s = %v, want %v as configmap-reload reads it", ck.name, ck.got, ck.want)
				}
			}
		})
	}
}

// Only the names of hotreload's long flags take one dash: a value that
// starts with one, or looks like a flag, stays a value, and -h stays help.
func TestGoFlagsRewriteOnlyFlagNames(t *testing.T) {
	c, err := parse(t, "-volume-dir", "-volume-dir", "-webhook-url=http://127.0.0.1/-/reload", "-webhook-header", "-X: y", "-poll", "-reload-on-start=false")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.VolumeDirs, ","); got != "-volume-dir" {
		t.Errorf("volume dirs = %q, want the value as given", got)
	}
	if got := strings.Join(c.Webhook.Headers, ","); got != "-X: y" {
		t.Errorf("headers = %q, want the value as given", got)
	}
	if !c.Poll || c.ReloadOnStart {
		t.Errorf("poll = %v, reload on start = %v: the switches with one dash", c.Poll, c.ReloadOnStart)
	}
	if _, err := parse(t, "-volume-dir=/etc/config", "-webhook-url=http://127.0.0.1/", "-no-such-flag=1"); err == nil {
		t.Error("an unknown flag with one dash parsed")
	}
	var out bytes.Buffer
	terminated := false
	// terminate does not stop Parse here, which then finds no --volume-dir.
	_, _ = Parse([]string{"-h"}, "test", &out, func(int) { terminated = true })
	if !terminated || !strings.Contains(out.String(), "usage: hotreload") {
		t.Errorf("-h: terminated %v, output %.80q: want the help", terminated, out.String())
	}
}

// The Prometheus community charts (prometheus >= 20.0, alertmanager >= 1.0)
// pass prometheus-config-reloader's flags; they mean the same here.
func TestConfigReloaderAliases(t *testing.T) {
	c, targets, err := parseAll(t, "--watched-dir=/etc/config", "--listen-address=0.0.0.0:8080",
		"--reload-url=http://127.0.0.1:9090/-/reload", "--watched-dir=/etc/rules")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.VolumeDirs, ","); got != "/etc/config,/etc/rules" {
		t.Errorf("volume dirs = %q", got)
	}
	if c.ListenAddress != "0.0.0.0:8080" {
		t.Errorf("listen address = %q, want the alias's value over the default", c.ListenAddress)
	}
	if len(targets) != 1 || targets[0].Name() != "http://127.0.0.1:9090/-/reload" {
		t.Errorf("targets = %v", targets)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("HOTRELOAD_VOLUME_DIR", "/etc/a\n/etc/b")
	t.Setenv("HOTRELOAD_WEBHOOK_URL", "http://127.0.0.1:9090/-/reload")
	t.Setenv("HOTRELOAD_WEB_LISTEN_ADDRESS", "127.0.0.1:1234")
	t.Setenv("HOTRELOAD_DEBOUNCE", "0s")
	c, targets, err := parseAll(t)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.VolumeDirs, ","); got != "/etc/a,/etc/b" {
		t.Errorf("volume dirs from env = %q", got)
	}
	if c.ListenAddress != "127.0.0.1:1234" || c.Debounce != 0 || len(targets) != 1 {
		t.Errorf("config from env = %+v", c)
	}
}

func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	app := kingpin.New("t", "")
	(&Config{}).Register(app)
	for _, f := range app.Model().Flags {
		if f.Hidden || f.Name == "help" || f.Name == "version" {
			continue
		}
		want := "HOTRELOAD_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(f.Name))
		if f.Envar != want {
			t.Errorf("--%s reads env %q, want %q", f.Name, f.Envar, want)
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	dir := t.TempDir()
	url := "--webhook-url=http://127.0.0.1:9090/-/reload"
	vol := "--volume-dir=" + dir
	tests := []struct {
		name string
		args []string
		want string // in the one-line error
	}{
		{"unknown flag", []string{vol, url, "--frobnicate"}, "unknown long flag '--frobnicate'"},
		{"no volume", []string{url}, "--volume-dir is required"},
		{"empty volume", []string{"--volume-dir=", url}, `--volume-dir "": must not be empty`},
		{"empty optional volume", []string{vol, "--optional-volume-dir=", url}, `--optional-volume-dir "": must not be empty`},
		{"no target", []string{vol}, "no target: give --webhook-url or --signal"},
		{"url does not parse", []string{vol, "--webhook-url=::bad"}, "--webhook-url"},
		{"url scheme", []string{vol, "--webhook-url=ftp://host/x"}, "--webhook-url"},
		{"url twice", []string{vol, url, url}, "given twice"},
		{"method with spaces", []string{vol, url, "--webhook-method=PO ST"}, "--webhook-method"},
		{"status code", []string{vol, url, "--webhook-status-code=2x5"}, "--webhook-status-code"},
		{"negative debounce", []string{vol, url, "--debounce=-1s"}, "--debounce -1s: must not be negative"},
		{"negative timeout", []string{vol, url, "--webhook-timeout=-5s"}, "--webhook-timeout -5s: must not be negative"},
		{"not a duration", []string{vol, url, "--resync-interval=soon"}, "resync-interval"},
		{"zero poll interval", []string{vol, url, "--poll-interval=0"}, "--poll-interval 0: must be from 100ms to 1h"},
		{"negative retries", []string{vol, url, "--webhook-retries=-1"}, "--webhook-retries -1: must not be negative"},
		{"listen address", []string{vol, url, "--web.listen-address=9533"}, "--web.listen-address"},
		{"telemetry path", []string{vol, url, "--web.telemetry-path=metrics"}, "--web.telemetry-path"},
		{"telemetry path shadows health", []string{vol, url, "--web.telemetry-path=/-/healthy"}, "--web.telemetry-path"},
		{"log level", []string{vol, url, "--log.level=loud"}, "log.level"},
		{"header", []string{vol, url, "--webhook-header=NoColon"}, "--webhook-header"},
		{"cert without key", []string{vol, url, "--webhook-cert-file=" + filepath.Join(dir, "c.pem")}, "--webhook-key-file"},
		{"missing CA file", []string{vol, url, "--webhook-ca-file=" + filepath.Join(dir, "nope.pem")}, "--webhook-ca-file"},
		{"unknown signal", []string{vol, "--signal=SIGFOO", "--process-name=nginx"}, "--signal"},
		{"signal without process", []string{vol, "--signal=SIGHUP"}, "--process-name"},
		{"process without signal", []string{vol, url, "--process-name=nginx"}, "need --signal"},
		{"bad process regexp", []string{vol, "--signal=HUP", "--process-cmdline=nginx: (master"}, "--process-cmdline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseAll(t, tt.args...)
			if err == nil {
				t.Fatalf("Parse(%q) = nil error, want one naming %q", tt.args, tt.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

func TestSignalAndWebhookTogether(t *testing.T) {
	_, targets, err := parseAll(t, "--volume-dir=/etc/nginx", "--signal=HUP", "--process-name=nginx", "--webhook-url=http://127.0.0.1:8080/reload")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tg := range targets {
		names = append(names, tg.Name())
	}
	if got, want := strings.Join(names, " "), "http://127.0.0.1:8080/reload signal:nginx"; got != want {
		t.Errorf("targets = %q, want %q", got, want)
	}
}

// docs/flags.md documents every flag and docs/metrics.md every metric; this
// keeps them honest.
func TestDocsListEveryFlagAndMetric(t *testing.T) {
	flags, err := os.ReadFile("../../docs/flags.md")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	app := kingpin.New("t", "")
	(&Config{}).Register(app)
	for _, f := range app.Model().Flags {
		if f.Hidden || f.Name == "help" || f.Name == "version" {
			continue
		}
		row := regexp.MustCompile("(?m)^\\| `--" + regexp.QuoteMeta(f.Name) + "` \\| (`" + regexp.QuoteMeta(strings.Join(f.Default, ",")) + "`)? \\|")
		if !row.Match(flags) {
			t.Errorf("docs/flags.md's flag table has no row for --%s with default %q", f.Name, strings.Join(f.Default, ","))
		}
	}
	for _, m := range []string{
		"hotreload_reloads_total", "hotreload_reload_duration_seconds", "hotreload_last_reload_successful",
		"hotreload_last_reload_success_timestamp_seconds", "hotreload_changes_total", "hotreload_watch_events_total",
		"hotreload_watch_errors_total", "hotreload_volume_hashes_total", "hotreload_watched_dirs", "hotreload_volume_missing",
		"hotreload_volume_content_info", "hotreload_build_info", "hotreload_view_revision_info", "hotreload_view_rollbacks_total",
	} {
		if !bytes.Contains(metrics, []byte("| `"+m)) {
			t.Errorf("docs/metrics.md's metric table has no row for %s", m)
		}
	}
}

// Values that do harm are refused in one line naming the flag, with the
// bounds; the values at the bounds are taken.
func TestFlagBounds(t *testing.T) {
	vol, url := "--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload"
	bad := []struct {
		arg, want string
	}{
		{"--webhook-max-backoff=1ns", "--webhook-max-backoff 1ns: must be from 100ms to 10m"},
		{"--webhook-max-backoff=1h", "--webhook-max-backoff 1h: must be from 100ms to 10m"},
		{"--webhook-refused-max-backoff=10ms", "--webhook-refused-max-backoff 10ms: must be from 100ms to 1h"},
		{"--webhook-refused-max-backoff=2h", "--webhook-refused-max-backoff 2h: must be from 100ms to 1h"},
		{"--resync-interval=1ns", "--resync-interval 1ns: must be 0 (off) or from 1s to 24h"},
		{"--resync-interval=25h", "--resync-interval 25h: must be 0 (off) or from 1s to 24h"},
		{"--poll-interval=1ns", "--poll-interval 1ns: must be from 100ms to 1h"},
		{"--webhook-timeout=1ns", "--webhook-timeout 1ns: must be from 100ms to 10m"},
		{"--webhook-timeout=0", "--webhook-timeout 0: must be from 100ms to 10m"},
		{"--debounce=1000000h", "--debounce 1000000h: must be 0 (off) or from 1ms to 1h"},
		{"--debounce=1ns", "--debounce 1ns: must be 0 (off) or from 1ms to 1h"},
		{"--shutdown-grace=11m", "--shutdown-grace 11m: must be at most 10m"},
		{"--signal-confirm-timeout=1ms", "--signal-confirm-timeout 1ms: must be 0 (off) or from 100ms to 10m"},
		{"--debounce=-1s", "--debounce -1s: must not be negative"},
		{"--web.listen-address=:65536", `--web.listen-address ":65536": the port must be a number from 0 to 65535`},
		{"--web.listen-address=:http", `--web.listen-address ":http": the port must be a number from 0 to 65535`},
		{"--webhook-method=", `--webhook-method "": must not be empty; want an HTTP method such as POST`},
		{"--signal=", `--signal "": must not be empty; want a signal such as SIGHUP`},
		{"--poll=maybe", "--poll=maybe: --poll takes no value, or true or false"},
		{"--no-poll=maybe", "--no-poll=maybe: --no-poll takes no value, or true or false"},
	}
	for _, tt := range bad {
		t.Run(tt.arg, func(t *testing.T) {
			_, err := parse(t, vol, url, tt.arg)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Parse(%s) = %v, want %q", tt.arg, err, tt.want)
			}
		})
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("HOTRELOAD_POLL", "maybe")
		_, err := parse(t, vol, url)
		if want := `--poll "maybe": want true or false`; err == nil || err.Error() != want {
			t.Fatalf("Parse with HOTRELOAD_POLL=maybe = %v, want %q", err, want)
		}
	})

	good := []struct {
		args  []string
		check func(c *Config) bool
	}{
		{[]string{"--debounce=0", "--resync-interval=0", "--shutdown-grace=0", "--signal=HUP", "--signal-confirm-timeout=0"}, func(c *Config) bool {
			return c.Debounce == 0 && c.ResyncInterval == 0 && c.ShutdownGrace == 0 && c.Signal.ConfirmTimeout == 0
		}},
		{[]string{"--debounce=1ms", "--resync-interval=1s", "--poll-interval=100ms", "--webhook-timeout=100ms", "--webhook-max-backoff=100ms"}, func(c *Config) bool {
			return c.Debounce == time.Millisecond && c.ResyncInterval == time.Second && c.PollInterval == 100*time.Millisecond &&
				c.Webhook.Timeout == 100*time.Millisecond && c.MaxBackoff == 100*time.Millisecond
		}},
		{[]string{"--debounce=1h", "--resync-interval=24h", "--poll-interval=1h", "--webhook-timeout=10m", "--webhook-max-backoff=10m", "--shutdown-grace=10m"}, func(c *Config) bool {
			return c.Debounce == time.Hour && c.ResyncInterval == 24*time.Hour && c.PollInterval == time.Hour &&
				c.Webhook.Timeout == 10*time.Minute && c.MaxBackoff == 10*time.Minute && c.ShutdownGrace == 10*time.Minute
		}},
		{[]string{"--poll=true", "--reload-on-start=false"}, func(c *Config) bool { return c.Poll && !c.ReloadOnStart }},
		{[]string{"--no-poll=true", "--no-reload-on-start=false"}, func(c *Config) bool { return !c.Poll && c.ReloadOnStart }},
		{[]string{"--poll=false", "--reload-on-start"}, func(c *Config) bool { return !c.Poll && c.ReloadOnStart }},
		{[]string{"--web.listen-address=127.0.0.1:0"}, func(c *Config) bool { return c.ListenAddress == "127.0.0.1:0" }},
		{[]string{"--web.listen-address=:65535"}, func(c *Config) bool { return c.ListenAddress == ":65535" }},
	}
	for _, tt := range good {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c, err := parse(t, append([]string{vol, url}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("config = %+v", c)
			}
		})
	}
}

// Every duration flag has bounds, and its default is within them.
func TestEveryDurationFlagHasBounds(t *testing.T) {
	app := kingpin.New("t", "")
	(&Config{}).Register(app)
	for _, f := range app.Model().Flags {
		v, ok := f.Value.(durationValue)
		if !ok {
			continue
		}
		if _, ok := durationLimits[f.Name]; !ok {
			t.Errorf("--%s has no entry in durationLimits", f.Name)
		}
		for _, def := range f.Default {
			if err := v.Set(def); err != nil {
				t.Errorf("default of --%s: %v", f.Name, err)
			}
		}
	}
}

// TestBadValuesRefused: values that used to be taken and then did nothing,
// or something else than asked, are refused in one line naming the flag,
// given as a flag or through its environment variable.
func TestBadValuesRefused(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.yml")
	if err := os.WriteFile(empty, []byte("# nothing yet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unknown := filepath.Join(dir, "unknown.yml")
	if err := os.WriteFile(unknown, []byte("tls_server_config:\n  cert_fle: a.pem\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	vol := "--volume-dir=/etc/config"
	url := "--webhook-url=http://127.0.0.1:9090/-/reload"
	sig := []string{"--signal=HUP", "--process-name=nginx"}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"port out of range", []string{vol, "--webhook-url=http://127.0.0.1:99999/-/reload"}, nil,
			`--webhook-url "http://127.0.0.1:99999/-/reload": port 99999: must be from 1 to 65535`},
		{"port 0", []string{vol, "--webhook-url=http://127.0.0.1:0/-/reload"}, nil,
			`--webhook-url "http://127.0.0.1:0/-/reload": port 0: must be from 1 to 65535`},
		{"non-ASCII host", []string{vol, "--webhook-url=http://bücher.example/-/reload"}, nil,
			`--webhook-url "http://b%C3%BCcher.example/-/reload": host "bücher.example" is not ASCII: give its ASCII form (punycode, xn--...)`},
		{"non-ASCII host from the environment", []string{vol}, map[string]string{"HOTRELOAD_WEBHOOK_URL": "http://bücher.example/-/reload"},
			`--webhook-url "http://b%C3%BCcher.example/-/reload": host "bücher.example" is not ASCII: give its ASCII form (punycode, xn--...)`},
		{"confirm timeout without a signal", []string{vol, url, "--signal-confirm-timeout=10s"}, nil,
			"--signal-confirm-timeout 10s: needs --signal"},
		{"confirm timeout without a signal, from the environment", []string{vol, url}, map[string]string{"HOTRELOAD_SIGNAL_CONFIRM_TIMEOUT": "0"},
			"--signal-confirm-timeout 0s: needs --signal"},
		{"probe interval without a webhook", append([]string{vol, "--webhook-probe-interval=1s"}, sig...), nil,
			"--webhook-probe-interval 1s: needs --webhook-url"},
		{"probe interval without a webhook, from the environment", append([]string{vol}, sig...), map[string]string{"HOTRELOAD_WEBHOOK_PROBE_INTERVAL": "0"},
			"--webhook-probe-interval 0s: needs --webhook-url"},
		{"empty web config file name", []string{vol, url, "--web.config.file="}, nil,
			`--web.config.file "": must not be empty; want a file in the exporter-toolkit format`},
		{"web config file that sets nothing", []string{vol, url, "--web.config.file=" + empty}, nil,
			"--web.config.file " + empty + ": sets nothing, so the endpoints would be served as without it: give tls_server_config or basic_auth_users"},
		{"web config file that sets nothing, from the environment", []string{vol, url}, map[string]string{"HOTRELOAD_WEB_CONFIG_FILE": empty},
			"--web.config.file " + empty + ": sets nothing, so the endpoints would be served as without it: give tls_server_config or basic_auth_users"},
		{"web config file with a typo", []string{vol, url, "--web.config.file=" + unknown}, nil,
			"--web.config.file " + unknown + ": yaml: unmarshal errors: line 2: field cert_fle not found in type web.TLSConfig"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, _, err := parseAll(t, tt.args...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v,\nwant %s", err, tt.want)
			}
		})
	}
}
