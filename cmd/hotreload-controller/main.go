// Command hotreload-controller annotates the pods that mount a ConfigMap or
// Secret when it changes, so that the kubelet rewrites their volumes at once
// and the hotreload sidecar reloads the app within a second, instead of at
// the kubelet's next sync. This file only wires the parts together; see the
// controller package for the work.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	promversion "github.com/prometheus/common/version"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	admissionregistrationv1client "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/controller/config"
	"github.com/hotreload/hotreload/controller/injector"
	"github.com/hotreload/hotreload/controller/rollout"
	"github.com/hotreload/hotreload/internal/cli"
	"github.com/hotreload/hotreload/internal/version"
	"github.com/hotreload/hotreload/internal/web"
)

func main() { os.Exit(runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr)) }

// runMain runs the controller until SIGTERM, SIGINT or the end of ctx, and
// returns the exit status.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := config.Parse(args, promversion.Print("hotreload-controller"), stdout, os.Exit)
	if err != nil {
		return badInput(stderr, err)
	}
	logger := cli.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	// client-go logs through klog: send it to the same logger.
	klog.SetLogger(controller.KlogLogger(log.With(logger, "component", "client-go")))

	restConfig, err := restConfig(cfg)
	if err != nil {
		return badInput(stderr, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	version.Register(reg)
	restConfig.Wrap(controller.CountRequests(reg))

	// One typed client per API group it calls, not kubernetes.Interface,
	// which links the clients of every group; one HTTP client for all.
	httpClient, err := rest.HTTPClientFor(restConfig)
	if err != nil {
		return badInput(stderr, fmt.Errorf("--kubeconfig: %w", err))
	}
	pods, err := corev1client.NewForConfigAndClient(protobuf(restConfig), httpClient)
	if err != nil {
		return badInput(stderr, fmt.Errorf("--kubeconfig: %w", err))
	}
	leases, err := coordinationv1client.NewForConfigAndClient(protobuf(restConfig), httpClient)
	if err != nil {
		return badInput(stderr, fmt.Errorf("--kubeconfig: %w", err))
	}
	meta, err := metadata.NewForConfigAndClient(restConfig, httpClient)
	if err != nil {
		return badInput(stderr, fmt.Errorf("--kubeconfig: %w", err))
	}

	opts := controller.Options{
		Pods:           pods,
		Metadata:       meta,
		Leases:         leases,
		Namespaces:     cfg.Namespaces,
		ConfigMapsOnly: !cfg.WatchSecrets,
		Workers:        cfg.Workers,
		Coalesce:       cfg.Coalesce,
	}
	if cfg.LeaderElect {
		opts.LeaderElection = &controller.LeaderElection{
			Namespace:     cfg.LeaseNamespace,
			Name:          cfg.LeaseName,
			Identity:      cfg.Identity,
			LeaseDuration: cfg.LeaseDuration,
			RenewDeadline: cfg.RenewDeadline,
			RetryPeriod:   cfg.RetryPeriod,
		}
	}
	if cfg.Rollouts {
		part, err := rollouts(ctx, logger, reg, cfg, restConfig, httpClient, pods)
		if err != nil {
			return badInput(stderr, err)
		}
		opts.Parts = append(opts.Parts, part)
	}
	ready := func() bool { return true }
	var inj *injector.Injector
	if cfg.Injector.Enabled {
		webhooks, err := admissionregistrationv1client.NewForConfigAndClient(restConfig, httpClient)
		if err != nil {
			return badInput(stderr, fmt.Errorf("--kubeconfig: %w", err))
		}
		inj, err = newInjector(logger, reg, cfg, pods, webhooks)
		if err != nil {
			return badInput(stderr, err)
		}
		opts.Parts = append(opts.Parts, inj)
		ready = inj.Ready
	}
	c, err := controller.New(logger, reg, opts)
	if err != nil {
		return badInput(stderr, err)
	}
	srv, err := web.Listen(logger, cfg.ListenAddress, handler(reg, cfg.TelemetryPath, func() bool { return c.Ready() && ready() }))
	if err != nil {
		return badInput(stderr, err)
	}
	var webhookSrv *web.Server
	if inj != nil {
		webhookSrv, err = web.ListenTLS(logger, "--injector.listen-address", cfg.Injector.ListenAddress, inj.Handler(), inj.TLSConfig())
		if err != nil {
			return badInput(stderr, err)
		}
	}

	namespaces := "all"
	if len(cfg.Namespaces) > 0 {
		namespaces = strings.Join(cfg.Namespaces, ",")
	}
	level.Info(logger).Log("msg", "starting", "version", version.Version, "revision", version.Revision,
		"api", restConfig.Host, "namespaces", namespaces, "secrets", cfg.WatchSecrets, "coalesce", cfg.Coalesce, "leader_elect", cfg.LeaderElect,
		"injector", cfg.Injector.Enabled)

	var g run.Group
	g.Add(cli.Until(func(stop context.Context) error {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		defer signal.Stop(sig)
		select {
		case s := <-sig:
			level.Info(logger).Log("msg", "shutting down", "signal", s)
		case <-ctx.Done():
			level.Info(logger).Log("msg", "shutting down")
		case <-stop.Done():
		}
		return nil
	}))
	g.Add(cli.Until(c.Run))
	g.Add(cli.Until(srv.Run))
	if inj != nil {
		g.Add(cli.Until(inj.Run))
		g.Add(cli.Until(webhookSrv.Run))
	}
	if err := g.Run(); err != nil {
		level.Error(logger).Log("msg", "exiting", "err", err)
		return 1
	}
	level.Info(logger).Log("msg", "stopped")
	return 0
}

// newInjector builds the injector of the command line: its clients and
// its certificates' names.
func newInjector(logger log.Logger, reg prometheus.Registerer, cfg *config.Config, core *corev1client.CoreV1Client,
	webhooks admissionregistrationv1client.MutatingWebhookConfigurationsGetter) (*injector.Injector, error) {
	ic := cfg.Injector
	return injector.New(logger, reg, injector.Options{
		Sidecar:        injector.Sidecar{Image: ic.Image, ImagePullPolicy: corev1.PullPolicy(ic.ImagePullPolicy)},
		NativeSidecars: ic.NativeSidecars,
		ServerVersion: func(ctx context.Context) (string, error) {
			b, err := core.RESTClient().Get().AbsPath("/version").DoRaw(ctx)
			if err != nil {
				return "", err
			}
			var info struct {
				GitVersion string `json:"gitVersion"`
			}
			if err := json.Unmarshal(b, &info); err != nil {
				return "", fmt.Errorf("decode /version: %w", err)
			}
			return info.GitVersion, nil
		},
		Namespace:         ic.Namespace,
		ExcludeNamespaces: ic.ExcludeNamespaces,
		ContentKey:        ic.ContentKey,
		ContentKeySecret:  ic.ContentKeySecret,
		Certs:             ic.Certs,
		CertSecret:        ic.CertSecret,
		Webhook:           ic.Webhook,
		Service:           ic.Service,
		CertTimes:         injector.CertTimes{CA: ic.CAValidity, Cert: ic.CertValidity, Overlap: ic.CertOverlap},
		Secrets:           core,
		Events:            core,
		Webhooks:          webhooks,
	})
}

// rollouts builds the rollout part. Without the ConfigRollout CRD (or
// the right to list ConfigRollouts) it runs restart mode alone, and says so.
func rollouts(ctx context.Context, logger log.Logger, reg prometheus.Registerer, cfg *config.Config, rc *rest.Config, httpClient *http.Client, core corev1client.CoreV1Interface) (*rollout.Controller, error) {
	dyn, err := dynamic.NewForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig: %w", err)
	}
	ns := ""
	if len(cfg.Namespaces) > 0 {
		ns = cfg.Namespaces[0]
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = rollout.NewClient(dyn).List(lctx, ns, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err):
		level.Info(logger).Log("msg", "the ConfigRollout CRD is not installed: ConfigRollouts are off, restart mode runs; apply examples/controller/crd.yaml and restart the controller to use them")
		dyn = nil
	case apierrors.IsForbidden(err):
		level.Warn(logger).Log("msg", "API call failed, ConfigRollouts are off (restart mode runs)", "call", "list configrollouts", "err", err,
			"hint", "its RBAC does not allow this: grant it as examples/controller/controller.yaml does, and restart the controller")
		dyn = nil
	case err != nil:
		// The informers say what fails; the ConfigRollout informer
		// retries until the API server answers.
		level.Debug(logger).Log("msg", "cannot tell whether the ConfigRollout CRD is installed; assuming it is", "err", err)
	}
	opts := rollout.Options{Core: core, Workers: cfg.RolloutWorkers, ScrapeTimeout: cfg.ScrapeTimeout, ContentURL: cfg.TestContentURL}
	if dyn != nil {
		opts.Dynamic = dyn
	}
	return rollout.New(logger, reg, opts)
}

// restConfig is the client configuration: the pod's service account, or
// --kubeconfig.
func restConfig(cfg *config.Config) (*rest.Config, error) {
	var (
		rc  *rest.Config
		err error
	)
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig is required outside a pod: %w", err)
		}
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
	}
	rc.QPS = float32(cfg.QPS)
	rc.Burst = cfg.Burst
	rc.UserAgent = "hotreload-controller/" + version.Version
	return rc, nil
}

// protobuf makes the typed clients read pods and Leases as protobuf, which
// costs less than JSON to decode at the start and on every pod update.
func protobuf(rc *rest.Config) *rest.Config {
	rc = rest.CopyConfig(rc)
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	return rc
}

// badInput reports a problem found before start, such as a bad flag or a
// port in use, in one line, and returns the exit status for it.
func badInput(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "hotreload-controller: error: %v\n", err)
	return 2
}

// handler serves the controller's metrics and probes: /-/ready once the
// caches have synced.
func handler(reg *prometheus.Registry, telemetryPath string, ready func() bool) http.Handler {
	return web.Mux("hotreload-controller", "the caches have not synced yet", reg, telemetryPath, ready)
}
