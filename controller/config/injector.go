package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/hotreload/hotreload/internal/version"
)

// Injector is the command line of the injector, the mutating admission
// webhook that adds the hotreload sidecar (docs/injector.md).
type Injector struct {
	Enabled           bool
	ListenAddress     string
	Image             string
	ImagePullPolicy   string
	NativeSidecars    string
	Namespace         string // the controller's own; default the pod's
	ExcludeNamespaces []string
	ContentKey        string
	ContentKeySecret  string

	Certs        string
	CertSecret   string
	Webhook      string
	Service      string
	CertValidity time.Duration
	CAValidity   time.Duration
	CertOverlap  time.Duration
}

// SidecarRepository is the sidecar's image without its tag; a release
// build's default image is it with the build's version.
const SidecarRepository = "ghcr.io/hotreload/hotreload"

// releaseVersion matches the versions of releases, which have an image.
var releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+(-(alpha|beta|rc)\.?\d*)?$`)

func (c *Config) registerInjector(flag func(name, help string) *kingpin.FlagClause) {
	i := &c.Injector
	flag("injector", "Serve the mutating admission webhook that adds the hotreload sidecar to pods annotated hotreload.dev/reload-url, hotreload.dev/signal, hotreload.dev/restart or hotreload.dev/rollout (docs/injector.md).").
		Default("false").BoolVar(&i.Enabled)
	flag("injector.listen-address", "Address of the webhook's HTTPS server, which the API server calls through --injector.service.").
		Default(":8443").StringVar(&i.ListenAddress)
	image := flag("injector.image", "The sidecar's image; default "+SidecarRepository+":<the controller's version> for a release build.").PlaceHolder("IMAGE")
	if releaseVersion.MatchString(version.Version) {
		image.Default(SidecarRepository + ":" + version.Version)
	}
	image.StringVar(&i.Image)
	flag("injector.image-pull-policy", "The sidecar's imagePullPolicy: Always, IfNotPresent, Never, or empty for the cluster's default.").
		Default("").StringVar(&i.ImagePullPolicy)
	flag("injector.native-sidecars", "Add the sidecar as a native sidecar (an init container with restartPolicy: Always, started before the app): auto does on an API server of 1.33 or later (GA), true on any (1.29 to 1.32 have the feature on by default), false never.").
		Default("auto").StringVar(&i.NativeSidecars)
	flag("injector.namespace", "The controller's own namespace, where the certificate Secret is; never injected into. Default: the namespace of the pod's service account.").
		PlaceHolder("NAMESPACE").StringVar(&i.Namespace)
	flag("injector.exclude-namespace", "A namespace to never inject into, besides kube-system and the controller's own. Repeatable.").
		PlaceHolder("NAMESPACE").StringsVar(&i.ExcludeNamespaces)
	flag("injector.content-key", "The content key Secret of each namespace (--content-key-file, docs/security.md): create makes it where the injector first injects, existing mounts it where it exists, off never.").
		Default("create").StringVar(&i.ContentKey)
	flag("injector.content-key-secret", "The name of the content key Secret in each namespace.").
		Default("hotreload-content-key").StringVar(&i.ContentKeySecret)
	flag("injector.certs", "Who makes the webhook's serving certificate: self (the leader makes and rotates it, and writes the CA bundle into the webhook configuration) or external (cert-manager or another writes the Secret and the CA bundle).").
		Default("self").StringVar(&i.Certs)
	flag("injector.cert-secret", "The Secret (in --injector.namespace) of the serving certificate: tls.crt and tls.key, read by every replica as it changes.").
		Default("hotreload-injector-tls").StringVar(&i.CertSecret)
	flag("injector.webhook-config", "The MutatingWebhookConfiguration whose caBundle the leader keeps, with --injector.certs=self.").
		Default("hotreload-injector").StringVar(&i.Webhook)
	flag("injector.service", "The Service in --injector.namespace through which the API server calls the webhook: the serving certificate names it.").
		Default("hotreload-injector").StringVar(&i.Service)
	flag("injector.cert-validity", "Lifetime of a serving certificate made with --injector.certs=self; a new one is made when a third is left.").
		Default("720h").DurationVar(&i.CertValidity)
	flag("injector.ca-validity", "Lifetime of the CA made with --injector.certs=self; a new one is made when a third is left, trusted at once, signing --injector.cert-overlap later.").
		Default("8760h").DurationVar(&i.CAValidity)
	flag("injector.cert-overlap", "How long a new CA is trusted before it signs, and an old one after: longer than the API server takes to read the webhook configuration, and every replica the Secret.").
		Default("2m").DurationVar(&i.CertOverlap)
}

// checkInjector checks the injector's flags; own resolves the controller's
// namespace when --injector.namespace is not given.
func (c *Config) checkInjector(own func() (string, error)) error {
	i := &c.Injector
	for _, e := range []struct {
		flag, v string
		want    []string
	}{
		{"--injector.image-pull-policy", i.ImagePullPolicy, []string{"", "Always", "IfNotPresent", "Never"}},
		{"--injector.native-sidecars", i.NativeSidecars, []string{"auto", "true", "false"}},
		{"--injector.content-key", i.ContentKey, []string{"create", "existing", "off"}},
		{"--injector.certs", i.Certs, []string{"self", "external"}},
	} {
		if !slices.Contains(e.want, e.v) {
			return fmt.Errorf("%s %q: want %s", e.flag, e.v, strings.Join(e.want, ", "))
		}
	}
	if !i.Enabled {
		return nil
	}
	if _, _, err := net.SplitHostPort(i.ListenAddress); err != nil {
		return fmt.Errorf("--injector.listen-address %q: want host:port, such as :8443", i.ListenAddress)
	}
	if i.ListenAddress == c.ListenAddress {
		return fmt.Errorf("--injector.listen-address %s: the same as --web.listen-address", i.ListenAddress)
	}
	if i.Image == "" {
		v := version.Version
		if v == "" {
			v = "none"
		}
		return fmt.Errorf("--injector.image is required: this build (version %s) is not a release, whose image it would name", v)
	}
	if i.Namespace == "" {
		ns, err := own()
		if err != nil {
			return errors.New("--injector.namespace is required outside a pod")
		}
		i.Namespace = ns
	}
	for _, name := range []struct{ flag, v string }{
		{"--injector.cert-secret", i.CertSecret}, {"--injector.service", i.Service},
		{"--injector.webhook-config", i.Webhook}, {"--injector.content-key-secret", i.ContentKeySecret},
	} {
		if strings.TrimSpace(name.v) == "" {
			return fmt.Errorf("%s %q: must not be empty", name.flag, name.v)
		}
	}
	if slices.Contains(i.ExcludeNamespaces, "") {
		return errors.New(`--injector.exclude-namespace "": must not be empty`)
	}
	// The certificate times are checked where they are used
	// (injector.CertTimes.Check), which names the flags.
	return nil
}
