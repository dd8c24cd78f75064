// Package config holds hotreload-controller's command line: every flag, its
// environment variable, and the checks that turn a bad command line into one
// line naming the flag.
package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// ServiceAccountNamespaceFile holds the namespace of a pod's service
// account; the default of --leader-elect.lease-namespace comes from it.
const ServiceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Config is hotreload-controller's whole configuration.
type Config struct {
	Kubeconfig string
	Namespaces []string
	QPS        float64
	Burst      int
	Workers    int

	WatchSecrets bool
	Coalesce     time.Duration

	LeaderElect    bool
	LeaseName      string
	LeaseNamespace string
	Identity       string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration

	Rollouts       bool
	RolloutWorkers int
	ScrapeTimeout  time.Duration
	TestContentURL string

	ListenAddress string
	TelemetryPath string
	LogLevel      string
	LogFormat     string

	Injector Injector
}

// Register adds every flag to app. Each flag also reads the environment
// variable HOTRELOAD_<FLAG>, with dots and dashes as underscores.
func (c *Config) Register(app *kingpin.Application) {
	flag := func(name, help string) *kingpin.FlagClause {
		env := "HOTRELOAD_" + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(name))
		return app.Flag(name, help).Envar(env)
	}
	flag("kubeconfig", "Kubeconfig file; empty uses the pod's service account.").
		PlaceHolder("FILE").StringVar(&c.Kubeconfig)
	flag("namespace", "Namespace whose ConfigMaps, Secrets and pods to watch. Repeatable; none watches the whole cluster.").
		PlaceHolder("NAMESPACE").StringsVar(&c.Namespaces)
	flag("watch-secrets", "Watch Secrets (by metadata only) as well as ConfigMaps; --no-watch-secrets leaves Secret edits to the kubelet's periodic sync, and then the controller needs no access to Secrets.").
		Default("true").BoolVar(&c.WatchSecrets)
	flag("coalesce", "Merge a burst of changes into fewer nudges: a pod nudged less than this ago waits until no change has come for this long, and at most 10 times this long; a single change is never delayed. 0 nudges on every change.").
		Default("300ms").DurationVar(&c.Coalesce)
	flag("qps", "Requests per second to the API server, sustained; the pods of a big ConfigMap are patched at this rate.").
		Default("50").Float64Var(&c.QPS)
	flag("burst", "Requests to the API server in a burst above --qps.").
		Default("100").IntVar(&c.Burst)
	flag("workers", "Pods patched in parallel.").
		Default("2").IntVar(&c.Workers)

	flag("leader-elect", "Patch pods only while holding a Lease, so that several replicas can run; --no-leader-elect for one replica.").
		Default("true").BoolVar(&c.LeaderElect)
	flag("leader-elect.lease-name", "Name of the Lease.").
		Default("hotreload-controller").StringVar(&c.LeaseName)
	flag("leader-elect.lease-namespace", "Namespace of the Lease; default: the namespace of the pod's service account.").
		PlaceHolder("NAMESPACE").StringVar(&c.LeaseNamespace)
	flag("leader-elect.identity", "This replica's name in the Lease; default: the host name (the pod's name).").
		PlaceHolder("NAME").StringVar(&c.Identity)
	flag("leader-elect.lease-duration", "How long a standby waits after the last renewal before it takes a Lease over (a leader that stops cleanly hands it over at once).").
		Default("15s").DurationVar(&c.LeaseDuration)
	flag("leader-elect.renew-deadline", "How long the leader retries renewing before it gives up leading.").
		Default("10s").DurationVar(&c.RenewDeadline)
	flag("leader-elect.retry-period", "How often to try to take or renew the Lease.").
		Default("2s").DurationVar(&c.RetryPeriod)

	flag("rollouts", "Roll edits out as ConfigRollouts say, and stagger the restarts of pods in restart mode (hotreload.dev/restart); --no-rollouts only nudges. Without the ConfigRollout CRD installed, only restart mode runs.").
		Default("true").BoolVar(&c.Rollouts)
	flag("rollout.workers", "Sources whose rollouts are decided in parallel.").
		Default("4").IntVar(&c.RolloutWorkers)
	flag("rollout.scrape-timeout", "How long to wait for a sidecar's GET /-/content during a rollout; a pod that does not answer in time counts as not reported.").
		Default("2s").DurationVar(&c.ScrapeTimeout)
	flag("test.content-url", "For tests only: read every sidecar's report from this URL instead of the pod's address; {namespace} and {pod} are filled in.").
		Hidden().PlaceHolder("URL").StringVar(&c.TestContentURL)

	c.registerInjector(flag)

	flag("web.listen-address", "Address to serve metrics and health endpoints on.").
		Default(":9534").StringVar(&c.ListenAddress)
	flag("web.telemetry-path", "Path of the metrics endpoint.").
		Default("/metrics").StringVar(&c.TelemetryPath)
	flag("log.level", "Log level: debug, info, warn or error.").
		Default("info").StringVar(&c.LogLevel)
	flag("log.format", "Log format: logfmt or json.").
		Default("logfmt").StringVar(&c.LogFormat)
}

// Parse parses args (without the program name) into a Config and checks it.
// Errors are one line naming the flag. --help and --version write to out and
// call terminate.
func Parse(args []string, version string, out io.Writer, terminate func(int)) (*Config, error) {
	return parse(args, version, out, terminate, os.ReadFile, os.Hostname)
}

// ParseIn parses args as Parse does, as if in a pod of namespace ns on a
// host named host, for tests of manifests.
func ParseIn(args []string, ns, host string) (*Config, error) {
	return parse(args, "test", io.Discard, func(int) {},
		func(string) ([]byte, error) { return []byte(ns), nil },
		func() (string, error) { return host, nil })
}

func parse(args []string, version string, out io.Writer, terminate func(int), readFile func(string) ([]byte, error), hostname func() (string, error)) (*Config, error) {
	c := &Config{}
	app := kingpin.New("hotreload-controller", "Annotates the pods that mount a ConfigMap or Secret when it changes, so that the kubelet updates their volumes at once instead of at its next sync.")
	app.Version(version).Writer(out).UsageWriter(out).ErrorWriter(out).Terminate(terminate)
	app.HelpFlag.Short('h')
	c.Register(app)
	if _, err := app.Parse(args); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	own := func() (string, error) {
		b, err := readFile(ServiceAccountNamespaceFile)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return "", errors.New("no service account namespace")
		}
		return strings.TrimSpace(string(b)), nil
	}
	if err := c.checkInjector(own); err != nil {
		return nil, err
	}
	if !c.LeaderElect {
		return c, nil
	}
	if c.LeaseNamespace == "" {
		ns, err := own()
		if err != nil {
			return nil, errors.New("--leader-elect.lease-namespace is required outside a pod (or give --no-leader-elect)")
		}
		c.LeaseNamespace = ns
	}
	if c.Identity == "" {
		h, err := hostname()
		if err != nil || h == "" {
			return nil, errors.New("--leader-elect.identity is required: the host name is unknown")
		}
		c.Identity = h
	}
	return c, nil
}

func (c *Config) check() error {
	for _, ns := range c.Namespaces {
		if strings.TrimSpace(ns) == "" {
			return errors.New(`--namespace "": must not be empty (give none to watch every namespace)`)
		}
	}
	if c.QPS <= 0 {
		return fmt.Errorf("--qps %g: must be positive", c.QPS)
	}
	if c.Burst < 1 {
		return fmt.Errorf("--burst %d: must be at least 1", c.Burst)
	}
	if c.Coalesce < 0 || c.Coalesce > 10*time.Second {
		return fmt.Errorf("--coalesce %s: want 0 to 10s", c.Coalesce)
	}
	if c.Workers < 1 || c.Workers > 100 {
		return fmt.Errorf("--workers %d: want 1 to 100", c.Workers)
	}
	if c.RolloutWorkers < 1 || c.RolloutWorkers > 100 {
		return fmt.Errorf("--rollout.workers %d: want 1 to 100", c.RolloutWorkers)
	}
	if c.ScrapeTimeout < 100*time.Millisecond || c.ScrapeTimeout > time.Minute {
		return fmt.Errorf("--rollout.scrape-timeout %s: want 100ms to 1m", c.ScrapeTimeout)
	}
	if u := c.TestContentURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("--test.content-url %q: want an http or https URL", u)
	}
	if c.LeaderElect {
		if c.LeaseName == "" {
			return errors.New(`--leader-elect.lease-name "": must not be empty`)
		}
		// client-go's own checks, said with the flag names.
		if c.RetryPeriod <= 0 {
			return fmt.Errorf("--leader-elect.retry-period %s: must be positive", c.RetryPeriod)
		}
		if float64(c.RenewDeadline) <= 1.2*float64(c.RetryPeriod) {
			return fmt.Errorf("--leader-elect.renew-deadline %s: must be more than 1.2 times --leader-elect.retry-period %s", c.RenewDeadline, c.RetryPeriod)
		}
		if c.LeaseDuration <= c.RenewDeadline {
			return fmt.Errorf("--leader-elect.lease-duration %s: must be more than --leader-elect.renew-deadline %s", c.LeaseDuration, c.RenewDeadline)
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		return fmt.Errorf("--log.level %q: want debug, info, warn or error", c.LogLevel)
	}
	if !slices.Contains([]string{"logfmt", "json"}, c.LogFormat) {
		return fmt.Errorf("--log.format %q: want logfmt or json", c.LogFormat)
	}
	if _, _, err := net.SplitHostPort(c.ListenAddress); err != nil {
		return fmt.Errorf("--web.listen-address %q: want host:port, such as :9534", c.ListenAddress)
	}
	if !strings.HasPrefix(c.TelemetryPath, "/") || c.TelemetryPath == "/" || strings.HasPrefix(c.TelemetryPath, "/-/") {
		return fmt.Errorf("--web.telemetry-path %q: want a path such as /metrics, not / nor under /-/", c.TelemetryPath)
	}
	return nil
}
