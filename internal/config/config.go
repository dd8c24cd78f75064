// Package config holds hotreload's command line: every flag, its environment
// variable, and the checks that turn a bad command line into one clear line.
// Parse reads the flags; NewTargets, NewWatcher and OpenStateFile check the
// flags of a part and build it, so that every error names its flag; Hint
// turns the error of a failed reload into advice about the flags. The
// binary and the tests that check the shipped manifests share it, so a
// manifest is parsed exactly as the binary would parse it.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/hotreload/hotreload/internal/web"
	"github.com/hotreload/hotreload/notifier"
)

// Config is hotreload's whole configuration.
type Config struct {
	pid int // hotreload's pid, for Hint; 0 means os.Getpid()

	VolumeDirs     []string
	OptionalDirs   []string // --optional-volume-dir
	Debounce       time.Duration
	ResyncInterval time.Duration
	PollInterval   time.Duration
	Poll           bool
	ReloadOnStart  bool
	StateFile      string        // --state-file; "" means none
	ContentKeyFile string        // --content-key-file; "" means none
	ProbeInterval  time.Duration // --webhook-probe-interval (hidden); 0 never probes

	Webhook     notifier.WebhookOptions // the options every --webhook-url shares
	WebhookURLs []string
	Retries     int
	MaxBackoff  time.Duration
	// RefusedMaxBackoff bounds the backoff after the app refused a reload.
	RefusedMaxBackoff time.Duration
	ShutdownGrace     time.Duration

	Signal SignalConfig
	Fleet  FleetConfig // --view, --pod-annotations, --restart-container

	ListenAddress string
	WebConfigFile string // --web.config.file; "" serves plain HTTP without auth
	TelemetryPath string
	LogLevel      string
	LogFormat     string
}

// SignalConfig is the raw command line of the signal target.
type SignalConfig struct {
	Signal         string
	ProcessName    string
	ProcessCmdline string
	PIDFile        string
	Force          bool
	ConfirmTimeout time.Duration // --signal-confirm-timeout
}

// Register adds every flag to app. Each flag also reads the environment
// variable HOTRELOAD_<FLAG>, with dots and dashes as underscores.
func (c *Config) Register(app *kingpin.Application) {
	flag := func(name, help string) *kingpin.FlagClause {
		env := "HOTRELOAD_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(name))
		return app.Flag(name, help).Envar(env)
	}
	duration := func(name, help, def string, d *time.Duration) {
		flag(name, help).Default(def).SetValue(newDurationValue(name, d))
	}
	count := func(name, help, def string, n *int) {
		flag(name, help).Default(def).SetValue(countValue{name, n})
	}
	enum := func(name, help, def string, s *string, choices []string) {
		flag(name, help).Default(def).SetValue(enumValue{name, s, choices})
	}

	// Watching.
	flag("volume-dir", "Directory to watch (a mounted ConfigMap or Secret volume, or any directory). Repeatable.").
		PlaceHolder("DIR").StringsVar(&c.VolumeDirs)
	flag("optional-volume-dir", "Directory to watch that may be absent: unlike a --volume-dir, it is not reported (log, hotreload_volume_missing, /-/ready) when it has not appeared within 30s. Repeatable.").
		PlaceHolder("DIR").StringsVar(&c.OptionalDirs)
	duration("debounce", "Wait this long after the last change before reloading, so a burst reloads once; 0 reloads on the first change. A change never waits longer than 10 times this.", "100ms", &c.Debounce)
	duration("resync-interval", "Re-hash every volume this often to catch missed events, and retry targets whose reload failed; 0 turns it off.", "2m", &c.ResyncInterval)
	duration("poll-interval", "Poll period when inotify cannot be used, and while waiting for a volume that does not exist yet.", "5s", &c.PollInterval)
	flag("poll", "Never use inotify; poll every --poll-interval (for filesystems without inotify).").
		SetValue(boolValue{"poll", &c.Poll})
	flag("reload-on-start", "Reload once at start, before any change.").
		SetValue(boolValue{"reload-on-start", &c.ReloadOnStart})
	flag("state-file", "File that records the content last delivered to each target, so that a change made while hotreload was not running (a restart, a crash) is reloaded at start. Put it on an emptyDir.").
		PlaceHolder("FILE").SetValue(nonEmptyValue{"state-file", &c.StateFile, "a file on an emptyDir, such as /var/run/hotreload/state.json"})

	flag("content-key-file", "File holding the key of the content values (at least 32 random bytes, from a Secret that the pods of a workload share): hotreload_volume_content_info, /-/content and the state file show HMAC-SHA256(key, content hash). Without it, a Secret volume (any volume on tmpfs) shows none.").
		PlaceHolder("FILE").SetValue(nonEmptyValue{"content-key-file", &c.ContentKeyFile, "a file in a Secret volume, such as /etc/hotreload/key/key"})

	// HTTP targets.
	flag("webhook-url", "URL to call to reload the app; basic auth from its user info. Repeatable: each URL is its own target.").
		PlaceHolder("URL").StringsVar(&c.WebhookURLs)
	flag("webhook-method", "HTTP method of the reload request.").
		Default("POST").SetValue(nonEmptyValue{"webhook-method", &c.Webhook.Method, "an HTTP method such as POST"})
	flag("webhook-status-code", "Status code that means success, such as 200 or a class such as 2xx. Repeatable.").
		Default("200").StringsVar(&c.Webhook.StatusCodes)
	count("webhook-retries", "Attempts per change (as configmap-reload counts them); 0 retries until the reload succeeds.", "0", &c.Retries)
	duration("webhook-timeout", "Timeout of one reload request.", "30s", &c.Webhook.Timeout)
	// Hidden: benchmarks compare with the probe turned off.
	duration("webhook-probe-interval", "After a refused connection, check this often with a TCP connect whether the app listens again, and retry at once when it does; 0 turns it off.", defaultProbeInterval.String(), &c.ProbeInterval)
	app.GetFlag("webhook-probe-interval").Hidden()
	duration("webhook-max-backoff", "Longest wait between two attempts; retries back off exponentially, with jitter, up to this.", "5s", &c.MaxBackoff)
	duration("webhook-refused-max-backoff", "Longest wait between two attempts when the app refused the reload (it answered with an error status, such as Prometheus's 500 for an invalid config): the same config is tried again this rarely, and the next change at once.", "5m", &c.RefusedMaxBackoff)
	flag("webhook-header", `Header to send, as "Name: value". Repeatable.`).
		PlaceHolder("HEADER").StringsVar(&c.Webhook.Headers)
	flag("webhook-bearer-token-file", "File holding a bearer token, read at every request so a rotated token works.").
		PlaceHolder("FILE").StringVar(&c.Webhook.BearerTokenFile)
	flag("webhook-ca-file", "PEM file of CA certificates to trust, in addition to the system's.").
		PlaceHolder("FILE").StringVar(&c.Webhook.CAFile)
	flag("webhook-cert-file", "PEM client certificate for TLS; needs --webhook-key-file.").
		PlaceHolder("FILE").StringVar(&c.Webhook.CertFile)
	flag("webhook-key-file", "PEM key of the client certificate.").
		PlaceHolder("FILE").StringVar(&c.Webhook.KeyFile)
	flag("webhook-insecure-skip-verify", "Do not verify the server's certificate (for an app on localhost only).").
		SetValue(boolValue{"webhook-insecure-skip-verify", &c.Webhook.InsecureSkipVerify})

	// Signal target.
	flag("signal", "Signal to send to reload the app through a shared process namespace, such as SIGHUP, HUP or 1.").
		PlaceHolder("SIGNAL").SetValue(nonEmptyValue{"signal", &c.Signal.Signal, "a signal such as SIGHUP"})
	flag("process-name", "Signal processes with this name (comm, or base name of the executable or argv[0]); only the topmost of a tree, such as the nginx master.").
		PlaceHolder("NAME").StringVar(&c.Signal.ProcessName)
	flag("process-cmdline", "Signal processes whose full command line matches this regular expression.").
		PlaceHolder("REGEXP").StringVar(&c.Signal.ProcessCmdline)
	flag("pid-file", "Signal the process whose pid this file holds; read at every reload.").
		PlaceHolder("FILE").StringVar(&c.Signal.PIDFile)
	flag("signal-force", "Send the signal even if the target does not handle it and would be terminated by it.").
		SetValue(boolValue{"signal-force", &c.Signal.Force})
	duration("signal-confirm-timeout", "After signalling a process that has children (nginx's workers), wait up to this long for it to replace them, as a reload that took does; 0 does not check.", defaultConfirmTimeout.String(), &c.Signal.ConfirmTimeout)

	// Views and in-place restarts.
	c.registerFleet(flag, duration)

	// prometheus-config-reloader's names for the same things, which the
	// Prometheus community charts pass since prometheus chart 20.0 and
	// alertmanager chart 1.0: with them, swapping the image is enough.
	app.Flag("watched-dir", "Alias of --volume-dir.").Hidden().StringsVar(&c.VolumeDirs)
	app.Flag("reload-url", "Alias of --webhook-url.").Hidden().StringsVar(&c.WebhookURLs)
	app.Flag("listen-address", "Alias of --web.listen-address.").Hidden().StringVar(&c.ListenAddress)

	// Observability and lifecycle.
	flag("web.listen-address", "Address to serve metrics and health endpoints on.").
		Default(":9533").StringVar(&c.ListenAddress)
	flag("web.config.file", "File that turns on TLS and basic auth for the metrics and health endpoints, in the format of the Prometheus exporter-toolkit (tls_server_config, basic_auth_users); read again at every connection.").
		PlaceHolder("FILE").SetValue(nonEmptyValue{"web.config.file", &c.WebConfigFile, "a file in the exporter-toolkit format"})
	flag("web.telemetry-path", "Path of the metrics endpoint.").
		Default("/metrics").StringVar(&c.TelemetryPath)
	enum("log.level", "Log level: debug, info, warn or error.", "info", &c.LogLevel, []string{"debug", "info", "warn", "error"})
	enum("log.format", "Log format: logfmt or json.", "logfmt", &c.LogFormat, []string{"logfmt", "json"})
	duration("shutdown-grace", "On SIGTERM, how long an in-flight reload may take to finish.", "10s", &c.ShutdownGrace)
}

// Parse parses args (without the program name) into a Config and checks
// what can be checked of each flag on its own and of flags together. The
// options of the targets are checked by NewTargets. Errors are one line
// naming the flag. --help and --version write to out and call terminate.
func Parse(args []string, version string, out io.Writer, terminate func(int)) (*Config, error) {
	c := &Config{}
	app := kingpin.New("hotreload", "Reloads an app when its mounted ConfigMaps, Secrets or directories change, by HTTP or by signal, without restarting it.")
	app.Version(version).Writer(out).UsageWriter(out).ErrorWriter(out).Terminate(terminate)
	app.HelpFlag.Short('h')
	c.Register(app)
	args, err := boolArgs(app, goArgs(app, args))
	if err != nil {
		return nil, err
	}
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) check() error {
	if len(c.VolumeDirs)+len(c.OptionalDirs) == 0 && len(c.Fleet.Views) == 0 {
		return errors.New("--volume-dir is required: give the directory to watch (or a --view)")
	}
	for _, d := range c.VolumeDirs {
		if strings.TrimSpace(d) == "" {
			return errors.New(`--volume-dir "": must not be empty`)
		}
	}
	for _, d := range c.OptionalDirs {
		if strings.TrimSpace(d) == "" {
			return errors.New(`--optional-volume-dir "": must not be empty`)
		}
	}
	if _, port, err := net.SplitHostPort(c.ListenAddress); err != nil {
		return fmt.Errorf("--web.listen-address %q: want host:port, such as :9533", c.ListenAddress)
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("--web.listen-address %q: the port must be a number from 0 to 65535", c.ListenAddress)
	}
	if !strings.HasPrefix(c.TelemetryPath, "/") || c.TelemetryPath == "/" || strings.HasPrefix(c.TelemetryPath, "/-/") {
		return fmt.Errorf("--web.telemetry-path %q: want a path such as /metrics, not / nor under /-/", c.TelemetryPath)
	}
	if err := web.CheckConfigFile(c.WebConfigFile); err != nil {
		return fmt.Errorf("--web.config.file %s: %w", c.WebConfigFile, err)
	}
	if len(c.WebhookURLs) == 0 && c.Signal.Signal == "" && !c.Fleet.RestartContainer {
		return errors.New("no target: give --webhook-url or --signal, or --restart-container")
	}
	if s := c.Signal; s.Signal == "" && !c.Fleet.RestartContainer && (s.ProcessName != "" || s.ProcessCmdline != "" || s.PIDFile != "" || s.Force) {
		return errors.New("--process-name, --process-cmdline, --pid-file and --signal-force need --signal (or --restart-container)")
	}
	// A value other than the default of a flag whose target is not there
	// was meant for something and would do nothing.
	if c.Signal.Signal == "" && c.Signal.ConfirmTimeout != defaultConfirmTimeout {
		return fmt.Errorf("--signal-confirm-timeout %s: needs --signal", c.Signal.ConfirmTimeout)
	}
	if len(c.WebhookURLs) == 0 && c.ProbeInterval != defaultProbeInterval {
		return fmt.Errorf("--webhook-probe-interval %s: needs --webhook-url", c.ProbeInterval)
	}
	return c.checkFleet()
}

// Defaults of the flags that check() compares with.
const (
	defaultConfirmTimeout = 5 * time.Second
	defaultProbeInterval  = 200 * time.Millisecond
)
