package examples_test

// These tests hold the shipped manifests to hotreload's own rules, which no
// API server knows: every hotreload container's args parse with the binary's
// own flag parser, every watched volume is mounted whole and read-only in
// both containers, the UIDs fit the signal mode, and every hotreload
// container keeps the secure defaults. Whether a manifest is valid
// Kubernetes (schema, unknown or misplaced fields, kinds) is for the API
// server to say: the real-cluster suite (make e2e, TestExamplesDryRun) sends
// every manifest to one with kubectl apply --dry-run=server. What no server
// sees is decoded strictly here: kustomizations and the Helm values'
// containers. Only test files import k8s.io/*, so the binary never links the
// Kubernetes API.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/hotreload/hotreload/controller/injector"
	"github.com/hotreload/hotreload/internal/config"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/podpatch"
)

// What every hotreload container must look like. The resource figures leave
// room above the measured working set and usage (docs/performance.md);
// change them here and in the manifests together.
const (
	hotreloadImage = "ghcr.io/hotreload/hotreload:v0.1.0"
	hotreloadRepo  = "ghcr.io/hotreload/hotreload"
	hotreloadTag   = "v0.1.0"
	defaultUID     = 65532
	metricsPort    = 9533
	metricsName    = "metrics"
)

var (
	wantCPURequest    = resource.MustParse("5m")
	wantMemoryRequest = resource.MustParse("16Mi")
	wantMemoryLimit   = resource.MustParse("32Mi")
	// A CPU limit may be left out; one that is set must not throttle a
	// reload.
	minCPULimit = resource.MustParse("100m")
)

// Directories under examples/ that hold no manifests to check here: demo is
// a Go program, helm holds chart values (TestHelmValues checks them).
var skipDirs = map[string]bool{"demo": true, "helm": true, "testdata": true}

func TestMain(m *testing.M) {
	// config.Parse reads HOTRELOAD_* variables as flag defaults; a developer's
	// shell must not change what the manifests parse to.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "HOTRELOAD_") {
			os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}

// ---------------------------------------------------------------------------
// Decoding

// kustomization is the part of kustomize's Kustomization and Component that
// the examples use. Decoded strictly like the API types, so a field that
// kustomize would not know fails here too.
type kustomization struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Resources  []string         `json:"resources,omitempty"`
	Components []string         `json:"components,omitempty"`
	Patches    []kustomizePatch `json:"patches,omitempty"`
}

type kustomizePatch struct {
	Path   string           `json:"path,omitempty"`
	Patch  string           `json:"patch,omitempty"`
	Target *kustomizeTarget `json:"target,omitempty"`
}

type kustomizeTarget struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// kinds maps "apiVersion/kind" to a new value of its type. A kind that is
// not here fails the test: add its type when an example needs it.
var kinds = map[string]func() any{
	"v1/ConfigMap":        func() any { return new(corev1.ConfigMap) },
	"v1/Secret":           func() any { return new(corev1.Secret) },
	"v1/Service":          func() any { return new(corev1.Service) },
	"v1/ServiceAccount":   func() any { return new(corev1.ServiceAccount) },
	"v1/Pod":              func() any { return new(corev1.Pod) },
	"apps/v1/Deployment":  func() any { return new(appsv1.Deployment) },
	"apps/v1/StatefulSet": func() any { return new(appsv1.StatefulSet) },
	"apps/v1/DaemonSet":   func() any { return new(appsv1.DaemonSet) },
	"kustomize.config.k8s.io/v1beta1/Kustomization": func() any { return new(kustomization) },
	"kustomize.config.k8s.io/v1alpha1/Component":    func() any { return new(kustomization) },
}

// strictUnmarshal decodes YAML into v the way the API server does in strict
// field validation: field names are case-sensitive, and an unknown or
// duplicate field is an error.
func strictUnmarshal(doc []byte, v any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// document is one decoded YAML document of a file.
type document struct {
	index int
	kind  string // apiVersion/kind
	name  string
	obj   any
}

// decodeDocument decodes one YAML document into the type that its
// apiVersion and kind name: strictly for a kustomization, which no API
// server checks; as the API types for the rest, whose schema the server
// checks (make e2e). A kind that holds no pod and no kustomization is left
// to the server: its obj is nil.
func decodeDocument(doc []byte) (document, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return document{}, err
	}
	key := tm.APIVersion + "/" + tm.Kind
	newObj, ok := kinds[key]
	if !ok {
		return document{kind: key}, nil
	}
	obj := newObj()
	decode := func(doc []byte, v any) error { return yaml.Unmarshal(doc, v) }
	if strings.HasPrefix(key, "kustomize.config.k8s.io/") {
		decode = strictUnmarshal
	}
	if err := decode(doc, obj); err != nil {
		return document{}, fmt.Errorf("%s: %w", key, err)
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = yaml.Unmarshal(doc, &meta)
	return document{kind: key, name: meta.Metadata.Name, obj: obj}, nil
}

var separator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// splitDocuments splits a multi-document YAML file, dropping documents that
// hold only comments and blank lines.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, d := range separator.Split(string(data), -1) {
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// decodeFile reads and decodes every document of an examples/ file.
func decodeFile(t *testing.T, file string) []document {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(file))
	if err != nil {
		t.Fatal(err)
	}
	raw := splitDocuments(data)
	if len(raw) == 0 {
		t.Fatalf("%s: no YAML document", file)
	}
	docs := make([]document, 0, len(raw))
	for i, r := range raw {
		d, err := decodeDocument(r)
		if err != nil {
			t.Fatalf("%s, document %d: %v", file, i+1, err)
		}
		d.index = i + 1
		docs = append(docs, d)
	}
	return docs
}

// manifestFiles lists the YAML files under examples/ that hold manifests,
// as slash paths relative to examples/.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (skipDirs[d.Name()] || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
			files = append(files, filepath.ToSlash(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifest found under examples/")
	}
	return files
}

// patchFiles returns the files that some kustomization uses as a patch:
// their documents are fragments, merged into a Deployment defined elsewhere.
func patchFiles(t *testing.T, files []string) map[string]bool {
	t.Helper()
	patches := map[string]bool{}
	for _, f := range files {
		if b := path.Base(f); b != "kustomization.yaml" && b != "kustomization.yml" {
			continue
		}
		for _, d := range decodeFile(t, f) {
			k, ok := d.obj.(*kustomization)
			if !ok {
				continue
			}
			for _, p := range k.Patches {
				if p.Path != "" {
					patches[path.Join(path.Dir(f), p.Path)] = true
				}
			}
		}
	}
	return patches
}

// ---------------------------------------------------------------------------
// Checks

// pod is what the checks know of the pod around a container.
type pod struct {
	spec *corev1.PodSpec
	// partial is set for a kustomize patch or a chart's values: the rest of
	// the pod is defined elsewhere, so pod-wide checks are left out.
	partial bool
}

// sidecar is one hotreload container found in a pod.
type sidecar struct {
	c    corev1.Container
	init bool
}

func isHotreload(c corev1.Container) bool {
	repo, _, _ := strings.Cut(c.Image, ":")
	return repo == hotreloadRepo || c.Name == "hotreload"
}

// sidecars returns the pod's hotreload containers.
func sidecars(spec *corev1.PodSpec) []sidecar {
	var out []sidecar
	for _, c := range spec.InitContainers {
		if isHotreload(c) {
			out = append(out, sidecar{c, true})
		}
	}
	for _, c := range spec.Containers {
		if isHotreload(c) {
			out = append(out, sidecar{c, false})
		}
	}
	return out
}

// podTemplate returns the pod template of a workload document.
func podTemplate(obj any) (*corev1.PodTemplateSpec, *metav1.LabelSelector, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template, o.Spec.Selector, true
	case *appsv1.StatefulSet:
		return &o.Spec.Template, o.Spec.Selector, true
	case *appsv1.DaemonSet:
		return &o.Spec.Template, o.Spec.Selector, true
	case *corev1.Pod:
		return &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}, nil, true
	}
	return nil, nil, false
}

// parseArgs parses a hotreload container's args exactly as the binary does.
func parseArgs(args []string) (*config.Config, error) {
	cfg, err := config.Parse(args, "test", io.Discard, func(int) {})
	if err != nil {
		return nil, err
	}
	// The targets too, as the binary builds them at start: a bad webhook
	// option or signal is refused there, not by Parse.
	if _, err := config.NewTargets(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// effectiveUID is the uid a container runs as, if the manifest says.
func effectiveUID(spec *corev1.PodSpec, c corev1.Container) (int64, bool) {
	if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
		return *c.SecurityContext.RunAsUser, true
	}
	if spec != nil && spec.SecurityContext != nil && spec.SecurityContext.RunAsUser != nil {
		return *spec.SecurityContext.RunAsUser, true
	}
	return 0, false
}

// underMount returns the mount of c that holds dir, if any.
func underMount(c corev1.Container, dir string) (corev1.VolumeMount, bool) {
	dir = path.Clean(dir)
	for _, m := range c.VolumeMounts {
		mp := path.Clean(m.MountPath)
		if dir == mp || strings.HasPrefix(dir, mp+"/") {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

func volumeByName(spec *corev1.PodSpec, name string) (corev1.Volume, bool) {
	for _, v := range spec.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.Volume{}, false
}

func isSecretVolume(v corev1.Volume) bool {
	if v.Secret != nil {
		return true
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				return true
			}
		}
	}
	return false
}

// hotreloadProblems returns everything that is wrong with hotreload
// container s of pod p; none means it parses and keeps the secure defaults.
func hotreloadProblems(p pod, s sidecar) []string {
	var probs []string
	bad := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	c := s.c

	if c.Image != hotreloadImage {
		bad("image %q, want %q", c.Image, hotreloadImage)
	}
	if len(c.Command) > 0 {
		bad("command %q replaces the image's entrypoint; give only args", c.Command)
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "HOTRELOAD_") {
			bad("env %s: configure hotreload with args in the examples, so that this test parses what the binary sees", e.Name)
		}
	}

	// The command line, parsed by the binary's own parser.
	cfg, err := parseArgs(c.Args)
	if err != nil {
		bad("args %q do not parse: %v", c.Args, err)
		cfg = nil
	}
	for _, a := range c.Args {
		if !strings.HasPrefix(a, "--") {
			bad("arg %q: hotreload's flags take two dashes", a)
		}
		if name, value, _ := strings.Cut(a, "="); name == "--webhook-header" &&
			strings.HasPrefix(strings.ToLower(strings.TrimSpace(value)), "authorization") {
			bad("arg %q puts a credential in the pod spec; use --webhook-bearer-token-file", a)
		}
	}

	// Placement: a native sidecar must be restartable, a classic one must not
	// set a restart policy at all (the API rejects it).
	switch {
	case s.init && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways):
		bad("init container without restartPolicy: Always: the pod would wait forever for hotreload to exit")
	case !s.init && c.RestartPolicy != nil:
		bad("restartPolicy is only for init containers (native sidecars)")
	}

	// Security context.
	sc := c.SecurityContext
	if sc == nil {
		bad("no securityContext")
		sc = &corev1.SecurityContext{}
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		bad("runAsNonRoot is not true")
	}
	uid := int64(-1)
	if sc.RunAsUser == nil {
		bad("runAsUser is not set")
	} else {
		uid = *sc.RunAsUser
	}
	if uid == 0 {
		bad("runAsUser 0 is root")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		bad("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		bad("allowPrivilegeEscalation is not false")
	}
	if sc.Privileged != nil && *sc.Privileged {
		bad("privileged")
	}
	var added []corev1.Capability
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		bad("capabilities do not drop ALL")
	}
	if sc.Capabilities != nil {
		added = sc.Capabilities.Add
	}
	for _, capability := range added {
		if capability != "KILL" {
			bad("capability %s added; only KILL may be, and only to send a signal", capability)
		}
	}
	hasKill := slices.Contains(added, "KILL")
	seccomp := sc.SeccompProfile
	if seccomp == nil && !p.partial && p.spec.SecurityContext != nil {
		seccomp = p.spec.SecurityContext.SeccompProfile
	}
	if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		bad("seccompProfile is not RuntimeDefault")
	}

	// Signals: the target must be reachable and allowed.
	signalling := cfg != nil && cfg.Signal.Signal != ""
	if hasKill && !signalling {
		bad("KILL added but hotreload sends no signal")
	}
	if uid > 0 && uid != defaultUID {
		// Another uid than the image's is only for signalling an app that
		// runs as that uid.
		if !signalling {
			bad("runAsUser %d: want %d unless hotreload signals an app running as another uid", uid, defaultUID)
		}
	}
	if signalling && !p.partial {
		if p.spec.ShareProcessNamespace == nil || !*p.spec.ShareProcessNamespace {
			bad("--signal without shareProcessNamespace: true: hotreload cannot see the app's processes")
		}
		sameUID := false
		for _, other := range append(slices.Clone(p.spec.InitContainers), p.spec.Containers...) {
			if other.Name == c.Name {
				continue
			}
			if ou, ok := effectiveUID(p.spec, other); ok && ou == uid {
				sameUID = true
			}
		}
		if !sameUID && !hasKill {
			bad("--signal as uid %d: no other container runs as that uid (set its runAsUser) and KILL is not added: kill(2) would fail with EPERM", uid)
		}
		if sameUID && hasKill {
			bad("KILL added although the app runs as hotreload's uid: drop it")
		}
	}

	// Metrics port and probes.
	wantPort := int32(metricsPort)
	if cfg != nil {
		_, port, err := net.SplitHostPort(cfg.ListenAddress)
		if n, err2 := strconv.Atoi(port); err == nil && err2 == nil {
			wantPort = int32(n)
		}
	}
	var named *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == metricsName {
			named = &c.Ports[i]
		}
	}
	switch {
	case named == nil:
		bad("no port named %q", metricsName)
	case named.ContainerPort != wantPort:
		bad("port %q is %d, but hotreload listens on %d", metricsName, named.ContainerPort, wantPort)
	case named.Protocol != "" && named.Protocol != corev1.ProtocolTCP:
		bad("port %q protocol %s, want TCP", metricsName, named.Protocol)
	}
	for _, pr := range []struct {
		kind  string
		probe *corev1.Probe
		path  string
	}{
		{"livenessProbe", c.LivenessProbe, "/-/healthy"},
		{"readinessProbe", c.ReadinessProbe, "/-/ready"},
	} {
		switch {
		case pr.probe == nil || pr.probe.HTTPGet == nil:
			bad("no %s with httpGet", pr.kind)
		case pr.probe.HTTPGet.Path != pr.path:
			bad("%s path %q, want %q", pr.kind, pr.probe.HTTPGet.Path, pr.path)
		case pr.probe.HTTPGet.Port != intstr.FromString(metricsName):
			bad("%s port %s, want the named port %q", pr.kind, pr.probe.HTTPGet.Port.String(), metricsName)
		}
	}

	// Resources.
	req, lim := c.Resources.Requests, c.Resources.Limits
	for _, r := range []struct {
		what string
		list corev1.ResourceList
		name corev1.ResourceName
		want resource.Quantity
	}{
		{"requests", req, corev1.ResourceCPU, wantCPURequest},
		{"requests", req, corev1.ResourceMemory, wantMemoryRequest},
		{"limits", lim, corev1.ResourceMemory, wantMemoryLimit},
	} {
		got, ok := r.list[r.name]
		switch {
		case !ok:
			bad("no %s.%s", r.what, r.name)
		case got.Cmp(r.want) != 0:
			bad("%s.%s %s, want %s", r.what, r.name, got.String(), r.want.String())
		}
	}
	if cpu, ok := lim[corev1.ResourceCPU]; ok && cpu.Cmp(minCPULimit) < 0 {
		bad("limits.cpu %s throttles reloads; leave it out or give at least %s", cpu.String(), minCPULimit.String())
	}

	// Volumes: read-only, whole, and covering every watched directory; the
	// one exception is the directory of --state-file, which hotreload writes
	// and which must outlive a restart of its container: an emptyDir.
	stateDir := ""
	if cfg != nil && cfg.StateFile != "" {
		stateDir = path.Dir(cfg.StateFile)
		m, ok := underMount(c, cfg.StateFile)
		switch {
		case !ok:
			bad("--state-file %s: no volume is mounted there; it would not outlive a restart of the container", cfg.StateFile)
		case m.MountPath != stateDir:
			bad("--state-file %s: mount its volume at %s, not %s", cfg.StateFile, stateDir, m.MountPath)
		case m.ReadOnly:
			bad("--state-file %s: its volume %s is mounted readOnly", cfg.StateFile, m.Name)
		}
		if v, found := volumeByName(p.spec, m.Name); ok && found && v.EmptyDir == nil {
			bad("--state-file %s: volume %s is not an emptyDir", cfg.StateFile, m.Name)
		}
	} else if cfg != nil {
		bad("no --state-file: a change made while hotreload restarts would never reach the app")
	}
	// A --view's dir is the app's directory, which hotreload writes: an
	// emptyDir mounted writable.
	viewDirs := map[string]bool{}
	if cfg != nil {
		for _, v := range cfg.Fleet.Views {
			if v.Dir != "" {
				viewDirs[v.Dir] = true
			}
		}
	}
	for _, m := range c.VolumeMounts {
		if viewDirs[m.MountPath] {
			if v, found := volumeByName(p.spec, m.Name); found && v.EmptyDir == nil {
				bad("--view dir %s: volume %s is not an emptyDir", m.MountPath, m.Name)
			}
			if m.ReadOnly {
				bad("--view dir %s: mounted readOnly, hotreload cannot write it", m.MountPath)
			}
			continue
		}
		if !m.ReadOnly && m.MountPath != stateDir {
			bad("volume mount %s at %s is not readOnly", m.Name, m.MountPath)
		}
		if !p.partial {
			if _, ok := volumeByName(p.spec, m.Name); !ok {
				bad("volume mount %s: no such volume in the pod", m.Name)
			}
		}
	}
	if cfg != nil {
		for _, dir := range cfg.VolumeDirs {
			m, ok := underMount(c, dir)
			switch {
			case !ok:
				bad("--volume-dir %s: no volume is mounted there; hotreload would wait for it forever", dir)
			case m.SubPath != "" || m.SubPathExpr != "":
				bad("--volume-dir %s is a subPath mount, which never updates", dir)
			}
		}
		for _, raw := range cfg.WebhookURLs {
			if u, err := url.Parse(raw); err == nil && u.User != nil {
				bad("--webhook-url carries credentials in the pod spec; pass the URL through a Secret or use --webhook-bearer-token-file")
			}
		}
		if f := cfg.Webhook.BearerTokenFile; f != "" {
			m, ok := underMount(c, f)
			switch {
			case !ok:
				bad("--webhook-bearer-token-file %s: not on a mounted volume", f)
			case !p.partial:
				if v, ok := volumeByName(p.spec, m.Name); ok && !isSecretVolume(v) {
					bad("--webhook-bearer-token-file %s: volume %s is not a Secret", f, m.Name)
				}
			}
		}
	}
	return probs
}

// watchedVolumes returns the names of the volumes that hotreload watches.
func watchedVolumes(spec *corev1.PodSpec) map[string]bool {
	watched := map[string]bool{}
	for _, s := range sidecars(spec) {
		cfg, err := parseArgs(s.c.Args)
		if err != nil {
			continue
		}
		for _, dir := range cfg.VolumeDirs {
			if m, ok := underMount(s.c, dir); ok {
				watched[m.Name] = true
			}
		}
	}
	return watched
}

// podProblems returns what is wrong with a whole pod that runs hotreload.
func podProblems(spec *corev1.PodSpec) []string {
	var probs []string
	watched := watchedVolumes(spec)
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if watched[m.Name] && (m.SubPath != "" || m.SubPathExpr != "") {
				probs = append(probs, fmt.Sprintf("container %s mounts watched volume %s with subPath %q: it would never see an update", c.Name, m.Name, m.SubPath+m.SubPathExpr))
			}
		}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		probs = append(probs, "automountServiceAccountToken is not false; hotreload needs no API access")
	}
	return probs
}

func selectorMatches(sel *metav1.LabelSelector, labels map[string]string) bool {
	if sel == nil || len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		return false
	}
	for k, v := range sel.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return len(sel.MatchExpressions) == 0
}

// ---------------------------------------------------------------------------
// Tests of the manifests

// TestManifests decodes every manifest strictly and checks every pod that
// runs hotreload.
func TestManifests(t *testing.T) {
	files := manifestFiles(t)
	patches := patchFiles(t, files)
	for _, file := range files {
		t.Run(file, func(t *testing.T) {
			docs := decodeFile(t, file)
			partial := patches[file]

			// Names of the ConfigMaps and Secrets this file defines, so that a
			// volume can be checked to have its source in the same apply.
			defined := map[string]bool{}
			for _, d := range docs {
				switch o := d.obj.(type) {
				case *corev1.ConfigMap:
					defined["ConfigMap/"+o.Name] = true
				case *corev1.Secret:
					defined["Secret/"+o.Name] = true
				}
			}

			found := 0
			for _, d := range docs {
				t.Run(fmt.Sprintf("%d-%s-%s", d.index, path.Base(d.kind), d.name), func(t *testing.T) {
					if k, ok := d.obj.(*kustomization); ok {
						checkKustomization(t, file, k)
						return
					}
					tmpl, sel, ok := podTemplate(d.obj)
					if !ok {
						return
					}
					if !partial {
						if !selectorMatches(sel, tmpl.Labels) && sel != nil {
							t.Errorf("selector %v does not select the template's labels %v", sel.MatchLabels, tmpl.Labels)
						}
						for _, v := range tmpl.Spec.Volumes {
							if v.ConfigMap != nil && !defined["ConfigMap/"+v.ConfigMap.Name] && (v.ConfigMap.Optional == nil || !*v.ConfigMap.Optional) {
								t.Errorf("volume %s: ConfigMap %s is not defined in %s", v.Name, v.ConfigMap.Name, file)
							}
							if v.Secret != nil && !defined["Secret/"+v.Secret.SecretName] && (v.Secret.Optional == nil || !*v.Secret.Optional) {
								t.Errorf("volume %s: Secret %s is not defined in %s", v.Name, v.Secret.SecretName, file)
							}
						}
					}
					ss := sidecars(&tmpl.Spec)
					found += len(ss)
					if len(ss) == 0 {
						return
					}
					p := pod{spec: &tmpl.Spec, partial: partial}
					for _, s := range ss {
						t.Run(s.c.Name, func(t *testing.T) {
							if partial && s.c.Image == "" {
								// A patch that only overrides fields of the
								// sidecar that another patch adds: its args
								// must still parse.
								if _, err := parseArgs(s.c.Args); err != nil {
									t.Errorf("args %q do not parse: %v", s.c.Args, err)
								}
								return
							}
							for _, prob := range hotreloadProblems(p, s) {
								t.Error(prob)
							}
						})
					}
					if !partial {
						for _, prob := range podProblems(&tmpl.Spec) {
							t.Error(prob)
						}
					}
					// The file's name says which kind of sidecar it shows.
					for _, s := range ss {
						switch base := path.Base(file); {
						case base == "native-sidecar.yaml" && !s.init:
							t.Errorf("%s: container %s is not an init container", base, s.c.Name)
						case base == "sidecar.yaml" && s.init:
							t.Errorf("%s: container %s is an init container; native sidecars belong in native-sidecar.yaml", base, s.c.Name)
						}
					}
				})
			}
			if b := path.Base(file); (b == "sidecar.yaml" || b == "native-sidecar.yaml") && found == 0 {
				t.Errorf("%s runs no hotreload container", file)
			}
		})
	}
}

// checkKustomization checks that every file a kustomization names exists.
func checkKustomization(t *testing.T, file string, k *kustomization) {
	t.Helper()
	dir := path.Dir(file)
	var refs []string
	refs = append(refs, k.Resources...)
	refs = append(refs, k.Components...)
	for _, p := range k.Patches {
		if p.Path == "" && p.Patch == "" {
			t.Errorf("a patch has neither path nor patch")
		}
		if p.Path != "" {
			refs = append(refs, p.Path)
		}
	}
	for _, r := range refs {
		if _, err := os.Stat(filepath.FromSlash(path.Join(dir, r))); err != nil {
			t.Errorf("%s names %s: %v", file, r, err)
		}
	}
}

// loadPod returns the pod template of the first workload of an example file.
func loadPod(t *testing.T, file string) *corev1.PodSpec {
	t.Helper()
	for _, d := range decodeFile(t, file) {
		if tmpl, _, ok := podTemplate(d.obj); ok {
			return &tmpl.Spec
		}
	}
	t.Fatalf("%s has no workload", file)
	return nil
}

// TestExamples checks what each example is for: who it reloads, and how.
func TestExamples(t *testing.T) {
	tests := []struct {
		dir   string
		check func(t *testing.T, spec *corev1.PodSpec, cfg *config.Config)
	}{
		{"prometheus", func(t *testing.T, spec *corev1.PodSpec, cfg *config.Config) {
			wantWebhook(t, cfg, "http://127.0.0.1:9090/-/reload")
			if !containerHasArg(spec, "prometheus", "--web.enable-lifecycle") {
				t.Error("Prometheus runs without --web.enable-lifecycle: it would refuse every reload")
			}
		}},
		{"alertmanager", func(t *testing.T, spec *corev1.PodSpec, cfg *config.Config) {
			wantWebhook(t, cfg, "http://127.0.0.1:9093/-/reload")
		}},
		{"nginx", func(t *testing.T, spec *corev1.PodSpec, cfg *config.Config) {
			if cfg.Signal.Signal != "SIGHUP" || cfg.Signal.ProcessName != "nginx" {
				t.Errorf("signal %q to %q, want SIGHUP to nginx", cfg.Signal.Signal, cfg.Signal.ProcessName)
			}
			if len(cfg.WebhookURLs) != 0 {
				t.Errorf("nginx has no reload URL, but webhooks %q are set", cfg.WebhookURLs)
			}
			if spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace {
				t.Error("shareProcessNamespace is not true")
			}
			// Least privilege: the same uid as the nginx master, no capability.
			hr := sidecars(spec)[0].c
			if hr.SecurityContext.Capabilities != nil && len(hr.SecurityContext.Capabilities.Add) > 0 {
				t.Errorf("capabilities added: %v; run as nginx's uid instead", hr.SecurityContext.Capabilities.Add)
			}
			var nginx *corev1.Container
			for i := range spec.Containers {
				if spec.Containers[i].Name == "nginx" {
					nginx = &spec.Containers[i]
				}
			}
			if nginx == nil {
				t.Fatal("no container named nginx")
			}
			if !strings.HasPrefix(nginx.Image, "nginxinc/nginx-unprivileged:") {
				t.Errorf("nginx image %s: its master would not run as a non-root uid that hotreload can share", nginx.Image)
			}
			nu, _ := effectiveUID(spec, *nginx)
			hu, _ := effectiveUID(spec, hr)
			if nu != hu || nu == 0 {
				t.Errorf("nginx runs as uid %d and hotreload as %d; want the same non-root uid", nu, hu)
			}
		}},
		{"generic", func(t *testing.T, spec *corev1.PodSpec, cfg *config.Config) {
			if len(cfg.WebhookURLs) != 1 {
				t.Fatalf("webhooks %q, want one", cfg.WebhookURLs)
			}
			if cfg.Webhook.BearerTokenFile == "" {
				t.Error("no --webhook-bearer-token-file: the example must show a credential from a Secret")
			}
			// One ConfigMap and one Secret volume watched together.
			hr := sidecars(spec)[0].c
			var cms, secrets int
			for _, dir := range cfg.VolumeDirs {
				m, _ := underMount(hr, dir)
				v, _ := volumeByName(spec, m.Name)
				switch {
				case v.ConfigMap != nil:
					cms++
				case v.Secret != nil:
					secrets++
				}
			}
			if cms == 0 || secrets == 0 {
				t.Errorf("watches %d ConfigMap and %d Secret volumes; want at least one of each", cms, secrets)
			}
		}},
	}
	for _, tt := range tests {
		for _, variant := range []struct {
			file string
			init bool
		}{
			{"sidecar.yaml", false},
			{"native-sidecar.yaml", true},
		} {
			file := tt.dir + "/" + variant.file
			t.Run(file, func(t *testing.T) {
				spec := loadPod(t, file)
				ss := sidecars(spec)
				if len(ss) != 1 {
					t.Fatalf("%d hotreload containers, want 1", len(ss))
				}
				if ss[0].init != variant.init {
					t.Fatalf("hotreload is an init container: %v, want %v", ss[0].init, variant.init)
				}
				cfg, err := parseArgs(ss[0].c.Args)
				if err != nil {
					t.Fatalf("args: %v", err)
				}
				tt.check(t, spec, cfg)
			})
		}
	}
}

func wantWebhook(t *testing.T, cfg *config.Config, want string) {
	t.Helper()
	if !slices.Equal(cfg.WebhookURLs, []string{want}) {
		t.Errorf("webhooks %q, want %q", cfg.WebhookURLs, want)
	}
	if cfg.Signal.Signal != "" {
		t.Errorf("signal %q set; the app reloads over HTTP", cfg.Signal.Signal)
	}
}

func containerHasArg(spec *corev1.PodSpec, name, arg string) bool {
	for _, c := range spec.Containers {
		if c.Name == name && slices.Contains(c.Args, arg) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Tests that the checks can fail

// TestStrictDecodingRejectsMistakes feeds the strict decoder, which checks
// what no API server sees (kustomizations, the Helm values' containers),
// the mistakes it exists to catch.
func TestStrictDecodingRejectsMistakes(t *testing.T) {
	const good = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n  - path: p.yaml\n"
	tests := []struct {
		name    string
		doc     string
		wantErr string // "" means it must decode
	}{
		{"valid", good, ""},
		{"misspelt field", strings.Replace(good, "patches:", "patchez:", 1), `unknown field "patchez"`},
		{"wrong case", strings.Replace(good, "patches:", "Patches:", 1), "unknown field"},
		{"field at the wrong level", strings.Replace(good, "  - path: p.yaml", "  - path: p.yaml\n    paht: q.yaml", 1), `unknown field "patches[0].paht"`},
		{"duplicate field", good + "patches: []\n", `key "patches" already set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeDocument([]byte(tt.doc))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want no error, got %v", err)
			case tt.wantErr != "" && err == nil:
				t.Fatalf("decoded without error; want one containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Fatalf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
	// The Helm values' containers.
	if _, err := decodeContainer(map[string]any{"name": "hotreload", "imagee": "x"}); err == nil || !strings.Contains(err.Error(), `unknown field "imagee"`) {
		t.Errorf("decodeContainer of a misspelt field: %v", err)
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "# only a comment\n---\na: 1\n--- # second\nb: 2\n---\n\n---\nc: 3\n"
	got := splitDocuments([]byte(in))
	var keys []string
	for _, d := range got {
		keys = append(keys, strings.TrimSpace(string(d)))
	}
	if want := []string{"a: 1", "b: 2", "c: 3"}; !slices.Equal(keys, want) {
		t.Fatalf("documents %q, want %q", keys, want)
	}
}

// TestChecksRejectInsecureSidecars breaks known-good manifests one way at a
// time and requires the checks to say so.
func TestChecksRejectInsecureSidecars(t *testing.T) {
	tests := []struct {
		name   string
		file   string
		mutate func(spec *corev1.PodSpec, hr *corev1.Container)
		want   string
	}{
		{"root", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.RunAsUser = ptr(int64(0))
		}, "runAsUser 0"},
		{"runAsNonRoot unset", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.RunAsNonRoot = nil
		}, "runAsNonRoot"},
		{"another uid without reason", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.RunAsUser = ptr(int64(1000))
		}, "runAsUser 1000"},
		{"writable root filesystem", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}, "readOnlyRootFilesystem"},
		{"privilege escalation", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.AllowPrivilegeEscalation = nil
		}, "allowPrivilegeEscalation"},
		{"capabilities kept", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.Capabilities.Drop = []corev1.Capability{"NET_RAW"}
		}, "drop ALL"},
		{"capability added", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, "capability SYS_ADMIN"},
		{"KILL without a signal", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.Capabilities.Add = []corev1.Capability{"KILL"}
		}, "KILL added but"},
		{"no seccomp profile", "prometheus/sidecar.yaml", func(spec *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.SeccompProfile = nil
			spec.SecurityContext.SeccompProfile = nil
		}, "seccompProfile"},
		{"liveness on another path", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.LivenessProbe.HTTPGet.Path = "/healthz"
		}, "livenessProbe path"},
		{"readiness on a numbered port", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.ReadinessProbe.HTTPGet.Port = intstr.FromInt32(metricsPort)
		}, "named port"},
		{"no readiness probe", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.ReadinessProbe = nil
		}, "no readinessProbe"},
		{"metrics port renamed", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Ports[0].Name = "http"
		}, `no port named "metrics"`},
		{"metrics port not the listen address", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args = append(hr.Args, "--web.listen-address=:9999")
		}, "hotreload listens on 9999"},
		{"no memory limit", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			delete(hr.Resources.Limits, corev1.ResourceMemory)
		}, "no limits.memory"},
		{"tight CPU limit", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("10m")
		}, "limits.cpu 10m"},
		{"writable mount", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.VolumeMounts[0].ReadOnly = false
		}, "not readOnly"},
		{"subPath on the watched mount", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.VolumeMounts[0].SubPath = "prometheus.yml"
		}, "subPath mount, which never updates"},
		{"watched directory not mounted", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args[0] = "--volume-dir=/etc/elsewhere"
		}, "no volume is mounted there"},
		{"unknown flag", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args = append(hr.Args, "--watch-dir=/etc/prometheus")
		}, "do not parse"},
		{"single dash", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args = append(hr.Args, "-h")
		}, "two dashes"},
		{"command override", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Command = []string{"/bin/sh", "-c"}
		}, "entrypoint"},
		{"settings from env", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Env = append(hr.Env, corev1.EnvVar{Name: "HOTRELOAD_DEBOUNCE", Value: "1s"})
		}, "env HOTRELOAD_DEBOUNCE"},
		{"password in the URL", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args[1] = "--webhook-url=http://admin:s3cret@127.0.0.1:9090/-/reload"
		}, "carries credentials"},
		{"authorization header in args", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args = append(hr.Args, "--webhook-header=Authorization: Bearer abc")
		}, "puts a credential"},
		{"token file on a ConfigMap", "generic/sidecar.yaml", func(spec *corev1.PodSpec, _ *corev1.Container) {
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == "reload-token" {
					spec.Volumes[i].Secret = nil
					spec.Volumes[i].ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}
				}
			}
		}, "is not a Secret"},
		{"mount of a missing volume", "prometheus/sidecar.yaml", func(spec *corev1.PodSpec, _ *corev1.Container) {
			spec.Volumes = spec.Volumes[1:]
		}, "no such volume"},
		{"wrong image", "prometheus/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Image = "ghcr.io/hotreload/hotreload:latest"
		}, "image"},
		{"native sidecar without restartPolicy", "prometheus/native-sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.RestartPolicy = nil
		}, "restartPolicy: Always"},
		{"signal without a shared PID namespace", "nginx/sidecar.yaml", func(spec *corev1.PodSpec, _ *corev1.Container) {
			spec.ShareProcessNamespace = nil
		}, "shareProcessNamespace"},
		{"signal across uids", "nginx/sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.RunAsUser = ptr(int64(defaultUID))
		}, "EPERM"},
		{"KILL on top of the same uid", "nginx/native-sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.SecurityContext.Capabilities.Add = []corev1.Capability{"KILL"}
		}, "drop it"},
		{"app mounts the watched volume with subPath", "prometheus/sidecar.yaml", func(spec *corev1.PodSpec, _ *corev1.Container) {
			for i := range spec.Containers {
				if spec.Containers[i].Name == "prometheus" {
					spec.Containers[i].VolumeMounts[0].SubPath = "prometheus.yml"
				}
			}
		}, "would never see an update"},
		{"service account token mounted", "prometheus/sidecar.yaml", func(spec *corev1.PodSpec, _ *corev1.Container) {
			spec.AutomountServiceAccountToken = nil
		}, "automountServiceAccountToken"},
		{"no state file", "nginx/native-sidecar.yaml", func(_ *corev1.PodSpec, hr *corev1.Container) {
			hr.Args = slices.DeleteFunc(hr.Args, func(a string) bool { return strings.HasPrefix(a, "--state-file") })
		}, "no --state-file"},
		{"state file on a ConfigMap", "generic/sidecar.yaml", func(spec *corev1.PodSpec, _ *corev1.Container) {
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == "hotreload-state" {
					spec.Volumes[i].EmptyDir = nil
					spec.Volumes[i].ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}
				}
			}
		}, "is not an emptyDir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := loadPod(t, tt.file)
			p := pod{spec: spec}
			if probs := append(hotreloadProblems(p, sidecars(spec)[0]), podProblems(spec)...); len(probs) > 0 {
				t.Fatalf("the unbroken %s already fails: %q", tt.file, probs)
			}
			hr := hotreloadIn(spec)
			tt.mutate(spec, hr)
			probs := append(hotreloadProblems(p, sidecars(spec)[0]), podProblems(spec)...)
			for _, prob := range probs {
				if strings.Contains(prob, tt.want) {
					return
				}
			}
			t.Fatalf("no problem mentions %q; got %q", tt.want, probs)
		})
	}
}

// hotreloadIn returns a pointer to the pod's hotreload container.
func hotreloadIn(spec *corev1.PodSpec) *corev1.Container {
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if isHotreload(list[i]) {
				return &list[i]
			}
		}
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

// ---------------------------------------------------------------------------
// kustomize

// TestKustomizeComponent checks the component's contract without running
// kustomize: it selects the example's Deployment, and its sidecar mounts the
// volume that such a Deployment must have.
func TestKustomizeComponent(t *testing.T) {
	var comp *kustomization
	for _, d := range decodeFile(t, "kustomize/kustomization.yaml") {
		comp, _ = d.obj.(*kustomization)
	}
	if comp == nil || comp.Kind != "Component" || comp.APIVersion != "kustomize.config.k8s.io/v1alpha1" {
		t.Fatalf("kustomize/kustomization.yaml is not a kustomize.config.k8s.io/v1alpha1 Component: %+v", comp)
	}
	if len(comp.Patches) != 1 || comp.Patches[0].Target == nil {
		t.Fatalf("want one patch with a target, got %+v", comp.Patches)
	}
	target := comp.Patches[0].Target
	if target.Kind != "Deployment" || target.LabelSelector == "" {
		t.Fatalf("target %+v: want Deployments chosen by label", target)
	}
	key, value, _ := strings.Cut(target.LabelSelector, "=")

	// The patch: a Deployment fragment with the sidecar and nothing else.
	var patch *appsv1.Deployment
	for _, d := range decodeFile(t, path.Join("kustomize", comp.Patches[0].Path)) {
		patch, _ = d.obj.(*appsv1.Deployment)
	}
	if patch == nil {
		t.Fatal("the component's patch is not a Deployment")
	}
	spec := &patch.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 || len(spec.Volumes) != 1 || spec.Volumes[0].EmptyDir == nil {
		t.Fatalf("the patch must add one container and the emptyDir of its state file, nothing else: %d containers, %d init containers, %d volumes",
			len(spec.Containers), len(spec.InitContainers), len(spec.Volumes))
	}
	for _, prob := range hotreloadProblems(pod{spec: spec, partial: true}, sidecar{spec.Containers[0], false}) {
		t.Error(prob)
	}
	needs := map[string]bool{}
	for _, m := range spec.Containers[0].VolumeMounts {
		needs[m.Name] = true
	}

	// The example overlay's Deployment is selected and has those volumes.
	var app *appsv1.Deployment
	for _, d := range decodeFile(t, "kustomize-example/alertmanager.yaml") {
		if dep, ok := d.obj.(*appsv1.Deployment); ok {
			app = dep
		}
	}
	if app == nil {
		t.Fatal("kustomize-example/alertmanager.yaml has no Deployment")
	}
	if app.Labels[key] != value {
		t.Errorf("the example's Deployment lacks the label %s; the component would not select it", target.LabelSelector)
	}
	for name := range needs {
		if _, ok := volumeByName(spec, name); ok {
			continue // the patch brings it
		}
		if _, ok := volumeByName(&app.Spec.Template.Spec, name); !ok {
			t.Errorf("the example's Deployment has no volume %q that the sidecar mounts", name)
		}
	}

	// The overlay's own patch leaves only args that parse.
	var over *appsv1.Deployment
	for _, d := range decodeFile(t, "kustomize-example/hotreload-args.yaml") {
		over, _ = d.obj.(*appsv1.Deployment)
	}
	if over == nil || len(over.Spec.Template.Spec.Containers) != 1 {
		t.Fatal("kustomize-example/hotreload-args.yaml must patch one container")
	}
	if _, err := parseArgs(over.Spec.Template.Spec.Containers[0].Args); err != nil {
		t.Errorf("overlay args: %v", err)
	}
}

// TestKustomizeBuild renders the example overlay with kubectl's built-in
// kustomize, where kubectl is installed, and checks the result as a whole.
func TestKustomizeBuild(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		e2etest.SkipOrFail(t, "kubectl not installed: the component is checked by TestKustomizeComponent only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "kustomize", "kustomize-example")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, stderr.String())
	}
	var dep *appsv1.Deployment
	for i, raw := range splitDocuments(out) {
		d, err := decodeDocument(raw)
		if err != nil {
			t.Fatalf("rendered document %d: %v", i+1, err)
		}
		if o, ok := d.obj.(*appsv1.Deployment); ok {
			dep = o
		}
	}
	if dep == nil {
		t.Fatal("no Deployment rendered")
	}
	spec := &dep.Spec.Template.Spec
	ss := sidecars(spec)
	if len(ss) != 1 || ss[0].init {
		t.Fatalf("want one hotreload container beside the app, got %d", len(ss))
	}
	for _, prob := range append(hotreloadProblems(pod{spec: spec}, ss[0]), podProblems(spec)...) {
		t.Error(prob)
	}
	want := []string{"--volume-dir=/etc/hotreload/config", "--webhook-url=http://127.0.0.1:9093/-/reload", "--state-file=/var/run/hotreload/state.json"}
	if !slices.Equal(ss[0].c.Args, want) {
		t.Errorf("args %q, want the overlay's %q", ss[0].c.Args, want)
	}
	if len(spec.Containers) != 2 {
		t.Errorf("%d containers, want the app and hotreload", len(spec.Containers))
	}
}

// ---------------------------------------------------------------------------
// Helm values

// lookup walks a decoded YAML tree along dotted keys.
func lookup(tree map[string]any, keys ...string) (any, bool) {
	var cur any = tree
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// decodeContainer decodes a container spec out of chart values strictly.
func decodeContainer(v any) (corev1.Container, error) {
	var c corev1.Container
	return c, decodeInto(v, &c)
}

// decodeInto decodes v, a part of a YAML document, strictly into out.
func decodeInto(v, out any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	return strictUnmarshal(b, out)
}

// TestHelmValues checks the values snippets for the prometheus-community
// charts. Where a chart still runs configmap-reload (prometheus before 20.0,
// alertmanager before 1.0), only the image changes and the chart's own args
// must parse with hotreload. Where it runs prometheus-config-reloader, whose
// flags hotreload does not take, the chart's reloader is turned off and
// hotreload comes in as an extra container, checked like any other.
func TestHelmValues(t *testing.T) {
	type swap struct {
		image   []string // the image's key
		enabled []string // a key that must be true for the sidecar to run, if any
		// The args each chart version renders for its reloader: configmap-reload's
		// flags before prometheus 20.0 / alertmanager 1.0 (with two dashes, as
		// the charts write them, or one, as configmap-reload's usage does),
		// prometheus-config-reloader's since. hotreload must take all as they are.
		chartArgs [][]string
		// extraArgs and extraVolumeDirs, if the chart has them.
		extraArgs, extraVolumeDirs []string
	}
	type extra struct {
		disabled   []string // the chart's own reloader switch, to be false
		containers []string // the key of the extra containers
		asMap      bool     // the chart takes a map of name to spec
		volumes    []string // the key of the pod's extra volumes
	}
	tests := []struct {
		file  string
		swap  *swap
		extra *extra
	}{
		{file: "prometheus-image-swap.yaml", swap: &swap{
			image: []string{"configmapReload", "prometheus", "image"},
			chartArgs: [][]string{
				{"--volume-dir=/etc/config", "--webhook-url=http://127.0.0.1:9090/-/reload"},
				// As configmap-reload's own usage writes them (Go's flag
				// package), which manifests copied from it keep.
				{"-volume-dir=/etc/config", "-webhook-url=http://127.0.0.1:9090/-/reload"},
				{"-volume-dir", "/etc/config", "-webhook-url", "http://127.0.0.1:9090/-/reload", "-webhook-method", "POST", "-webhook-status-code", "200"},
				{"--watched-dir=/etc/config", "--reload-url=http://127.0.0.1:9090/-/reload"},
				{"--watched-dir=/etc/config", "--listen-address=0.0.0.0:8080", "--reload-url=http://127.0.0.1:9090/-/reload"},
			},
			extraArgs:       []string{"configmapReload", "prometheus", "extraArgs"},
			extraVolumeDirs: []string{"configmapReload", "prometheus", "extraVolumeDirs"},
		}},
		{file: "alertmanager-image-swap.yaml", swap: &swap{
			image:   []string{"configmapReload", "image"},
			enabled: []string{"configmapReload", "enabled"},
			chartArgs: [][]string{
				{"--volume-dir=/etc/alertmanager", "--webhook-url=http://127.0.0.1:9093/-/reload"},
				{"-volume-dir=/etc/alertmanager", "-webhook-url=http://127.0.0.1:9093/-/reload"},
				{"--watched-dir=/etc/alertmanager", "--reload-url=http://127.0.0.1:9093/-/reload"},
			},
		}},
		{file: "prometheus-sidecar.yaml", extra: &extra{
			disabled:   []string{"configmapReload", "prometheus", "enabled"},
			containers: []string{"server", "sidecarContainers"},
			asMap:      true,
			volumes:    []string{"server", "extraVolumes"},
		}},
		{file: "alertmanager-sidecar.yaml", extra: &extra{
			disabled:   []string{"configmapReload", "enabled"},
			containers: []string{"extraContainers"},
			volumes:    []string{"extraVolumes"},
		}},
	}

	// Every file under helm/ must be in the table.
	entries, err := os.ReadDir("helm")
	if err != nil {
		t.Fatal(err)
	}
	var onDisk, inTable []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yaml") {
			onDisk = append(onDisk, e.Name())
		}
	}
	for _, tt := range tests {
		inTable = append(inTable, tt.file)
	}
	sort.Strings(onDisk)
	sort.Strings(inTable)
	if !slices.Equal(onDisk, inTable) {
		t.Errorf("helm/ holds %q but the test knows %q", onDisk, inTable)
	}

	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("helm", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var values map[string]any
			if err := yaml.UnmarshalStrict(data, &values); err != nil {
				t.Fatalf("values: %v", err)
			}
			switch {
			case tt.swap != nil:
				for _, args := range tt.swap.chartArgs {
					checkImageSwap(t, values, tt.swap.image, tt.swap.enabled, args, tt.swap.extraArgs, tt.swap.extraVolumeDirs)
				}
			case tt.extra != nil:
				if v, ok := lookup(values, tt.extra.disabled...); !ok || v != false {
					t.Errorf("%s is %v, want false: the chart's own reloader takes flags hotreload does not", strings.Join(tt.extra.disabled, "."), v)
				}
				raw, ok := lookup(values, tt.extra.containers...)
				if !ok {
					t.Fatalf("no %s", strings.Join(tt.extra.containers, "."))
				}
				var containers []corev1.Container
				if tt.extra.asMap {
					m, ok := raw.(map[string]any)
					if !ok {
						t.Fatalf("%s is not a map of name to container", strings.Join(tt.extra.containers, "."))
					}
					for name, spec := range m {
						if s, ok := spec.(map[string]any); ok && s["name"] != nil {
							t.Errorf("%s: the chart names the container after its key; a name field would be a duplicate key", name)
						}
						c, err := decodeContainer(spec)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						c.Name = name
						containers = append(containers, c)
					}
				} else {
					list, ok := raw.([]any)
					if !ok {
						t.Fatalf("%s is not a list of containers", strings.Join(tt.extra.containers, "."))
					}
					for i, spec := range list {
						c, err := decodeContainer(spec)
						if err != nil {
							t.Fatalf("container %d: %v", i, err)
						}
						containers = append(containers, c)
					}
				}
				if len(containers) != 1 || !isHotreload(containers[0]) {
					t.Fatalf("want the hotreload container alone, got %d", len(containers))
				}
				// The chart defines the rest of the pod; the values add the
				// emptyDir of --state-file.
				spec := &corev1.PodSpec{}
				if raw, ok := lookup(values, tt.extra.volumes...); ok {
					if err := decodeInto(raw, &spec.Volumes); err != nil {
						t.Fatalf("%s: %v", strings.Join(tt.extra.volumes, "."), err)
					}
				}
				for _, prob := range hotreloadProblems(pod{spec: spec, partial: true}, sidecar{containers[0], false}) {
					t.Error(prob)
				}
				if cfg, err := parseArgs(containers[0].Args); err == nil && cfg.StateFile != "" {
					m, _ := underMount(containers[0], cfg.StateFile)
					if v, ok := volumeByName(spec, m.Name); !ok || v.EmptyDir == nil {
						t.Errorf("--state-file %s: %s adds no emptyDir %q for it", cfg.StateFile, strings.Join(tt.extra.volumes, "."), m.Name)
					}
				}
			}
		})
	}
}

func checkImageSwap(t *testing.T, values map[string]any, imageKey, enabledKey, chartArgs, extraArgsKey, extraDirsKey []string) {
	t.Helper()
	repo, _ := lookup(values, append(slices.Clone(imageKey), "repository")...)
	tag, _ := lookup(values, append(slices.Clone(imageKey), "tag")...)
	if repo != hotreloadRepo || tag != hotreloadTag {
		t.Errorf("%s is %v:%v, want %s:%s", strings.Join(imageKey, "."), repo, tag, hotreloadRepo, hotreloadTag)
	}
	if enabledKey != nil {
		if v, ok := lookup(values, enabledKey...); !ok || v != true {
			t.Errorf("%s is %v: the chart would not run the sidecar", strings.Join(enabledKey, "."), v)
		}
	}
	// The args as the chart renders them: its own, then --KEY=VALUE per
	// extraArgs entry in key order (Go templates range over sorted keys),
	// then --volume-dir per extraVolumeDirs entry.
	args := slices.Clone(chartArgs)
	if extraArgsKey != nil {
		if m, ok := lookup(values, extraArgsKey...); ok {
			extra, _ := m.(map[string]any)
			keys := make([]string, 0, len(extra))
			for k := range extra {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				args = append(args, fmt.Sprintf("--%s=%v", k, extra[k]))
			}
		}
	}
	if extraDirsKey != nil {
		if l, ok := lookup(values, extraDirsKey...); ok {
			dirs, _ := l.([]any)
			for _, d := range dirs {
				args = append(args, fmt.Sprintf("--volume-dir=%v", d))
			}
		}
	}
	if _, err := parseArgs(args); err != nil {
		t.Errorf("the chart's args %q do not parse with hotreload: %v", args, err)
	}
}

// TestInjectedWorkload runs the injector on examples/injector/workload.yaml
// (one annotation) and holds the sidecar it adds, native and classic, to the
// rules of every hand-written example; the app's own containers and volumes
// stay as they were.
func TestInjectedWorkload(t *testing.T) {
	const file = "injector/workload.yaml"
	var d *appsv1.Deployment
	for _, doc := range decodeFile(t, file) {
		if o, ok := doc.obj.(*appsv1.Deployment); ok {
			d = o
		}
	}
	if d == nil {
		t.Fatalf("%s has no Deployment", file)
	}
	var ours []string
	for k := range d.Spec.Template.Annotations {
		if strings.HasPrefix(k, "hotreload.dev/") {
			ours = append(ours, k)
		}
	}
	if !slices.Equal(ours, []string{injector.AnnotationReloadURL}) || len(sidecars(&d.Spec.Template.Spec)) != 0 {
		t.Fatalf("annotations %q, %d sidecars: the example adopts hotreload with the one annotation alone", ours, len(sidecars(&d.Spec.Template.Spec)))
	}
	for _, native := range []bool{true, false} {
		t.Run(map[bool]string{true: "native", false: "classic"}[native], func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: *d.Spec.Template.ObjectMeta.DeepCopy(), Spec: *d.Spec.Template.Spec.DeepCopy()}
			p.Namespace = "default"
			req, warnings, err := injector.ParseAnnotations(p.Annotations)
			if err != nil || len(warnings) > 0 {
				t.Fatalf("annotations: %v %q", err, warnings)
			}
			res, err := injector.Mutate(p, req, injector.Sidecar{Image: hotreloadImage, Native: native, ContentKeySecret: "hotreload-content-key"})
			if err != nil || len(res.Warnings) > 0 {
				t.Fatalf("mutate: %v %q", err, res.Warnings)
			}
			got := applyJSONPatch(t, p, res.Patch)
			ss := sidecars(&got.Spec)
			if len(ss) != 1 || ss[0].init != native {
				t.Fatalf("%d sidecars (init %v)", len(ss), len(ss) > 0 && ss[0].init)
			}
			for _, prob := range append(hotreloadProblems(pod{spec: &got.Spec}, ss[0]), podProblems(&got.Spec)...) {
				t.Error(prob)
			}
			app := got.Spec.Containers[0]
			if app.Name != "app" || len(app.VolumeMounts) != 1 || got.Spec.Volumes[0].ConfigMap == nil {
				t.Errorf("the app changed: %+v", app)
			}
		})
	}
}

func applyJSONPatch(t *testing.T, p *corev1.Pod, ops []injector.Op) *corev1.Pod {
	t.Helper()
	got, err := podpatch.Apply(p, ops)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
