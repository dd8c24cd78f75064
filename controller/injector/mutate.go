package injector

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/controller/rollout"
)

// What the injector adds, by name. The container's name is also how a pod
// that has the sidecar already is recognized.
const (
	ContainerName = controller.SidecarContainer
	// PortName names the sidecar's metrics port, as in the examples, the
	// chart's PodMonitor (which also selects the container by name, so an
	// app's port of the same name does not get in the way) and the
	// rollouts, which read /-/content there.
	PortName    = controller.SidecarPort
	DefaultPort = 9533

	StateVolume  = "hotreload-state"
	stateDir     = "/var/run/hotreload"
	stateFile    = stateDir + "/state.json"
	KeyVolume    = "hotreload-content-key"
	keyDir       = "/etc/hotreload/key"
	KeySecretKey = "key" // the key of the content key Secret's data
	podVolume    = "hotreload-pod"
	podDir       = "/hotreload/pod"
	sourceDir    = "/hotreload/source"
	stableDir    = "/hotreload/stable"
	volumesDir   = "/hotreload/volumes"
	stableSuffix = rollout.StableSuffix

	defaultUID = 65532
)

// Sidecar is what the injector adds beside what the pod asks for.
type Sidecar struct {
	// Image of the sidecar. Required.
	Image           string
	ImagePullPolicy corev1.PullPolicy
	// Native adds the sidecar as an init container with restartPolicy
	// Always (Kubernetes 1.29 and later; GA in 1.33), which starts before
	// the app and, with its startup probe, lets the app start only once
	// the sidecar is ready. Otherwise a classic sidecar: one more container.
	Native bool
	// ContentKeySecret names the Secret of the pod's namespace that holds
	// the content key (data "key"); "" for none.
	ContentKeySecret string
	// Resources of the sidecar; default requests cpu 5m, memory 16Mi and a
	// memory limit of 32Mi, the examples' figures.
	Resources *corev1.ResourceRequirements
}

// DefaultResources are the sidecar's requests and limits, from its
// measured working set (docs/performance.md).
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("5m"),
			corev1.ResourceMemory: resource.MustParse("16Mi"),
		},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi")},
	}
}

// Result is the change to a pod.
type Result struct {
	Patch []Op
	// Warnings about what the sidecar will not see or cannot do; the
	// sidecar is added all the same.
	Warnings []string
	// Mode is "native" or "classic"; Watched the volumes it watches.
	Mode    string
	Watched []string
}

// HasSidecar reports whether the pod has the hotreload sidecar already: a
// container or init container named hotreload, or running its image.
func HasSidecar(spec *corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if c.Name == ContainerName || imageRepoBase(c.Image) == "hotreload" {
				return true
			}
		}
	}
	return false
}

// imageRepoBase is the last path element of an image's repository:
// "hotreload" for ghcr.io/hotreload/hotreload:v1 or hotreload@sha256:....
func imageRepoBase(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	image = image[strings.LastIndexByte(image, '/')+1:]
	if i := strings.IndexByte(image, ':'); i >= 0 {
		image = image[:i]
	}
	return image
}

// Mutate returns the patch that adds the sidecar to pod as req asks. An
// error (one line per problem, each naming what to change) means the pod
// is to be admitted unchanged.
func Mutate(pod *corev1.Pod, req Request, o Sidecar) (Result, error) {
	m := &mutation{pod: pod, req: req, o: o}
	if err := m.build(); err != nil {
		return Result{}, err
	}
	return Result{Patch: m.patch(), Warnings: m.warnings, Mode: m.mode(), Watched: m.watched}, nil
}

type mutation struct {
	pod *corev1.Pod
	req Request
	o   Sidecar

	app      *corev1.Container // the app's container
	args     []string
	mounts   []corev1.VolumeMount
	volumes  []corev1.Volume       // added
	replaced map[int]corev1.Volume // by index in the pod's volumes
	sc       *corev1.SecurityContext
	port     int32
	watched  []string
	warnings []string
	errs     []error
	drains   bool // restart mode: the sidecar drains the pod first
}

func (m *mutation) mode() string {
	if m.o.Native {
		return "native"
	}
	return "classic"
}

func (m *mutation) fail(format string, args ...any) {
	m.errs = append(m.errs, fmt.Errorf(format, args...))
}
func (m *mutation) warn(format string, args ...any) {
	m.warnings = append(m.warnings, fmt.Sprintf(format, args...))
}

func (m *mutation) build() error {
	spec := &m.pod.Spec
	if m.o.Image == "" {
		return errors.New("injector: no sidecar image configured")
	}
	if spec.OS != nil && spec.OS.Name != corev1.Linux {
		return fmt.Errorf("the pod runs on %s: hotreload runs on Linux only", spec.OS.Name)
	}
	if len(spec.Containers) == 0 {
		return errors.New("the pod has no container")
	}
	m.app = &spec.Containers[0]
	if m.req.Container != "" {
		m.app = nil
		for i := range spec.Containers {
			if spec.Containers[i].Name == m.req.Container {
				m.app = &spec.Containers[i]
			}
		}
		if m.app == nil {
			return fmt.Errorf("%s %q: the pod has no such container (it has %s)", AnnotationContainer, m.req.Container, containerNames(spec.Containers))
		}
	}
	for _, name := range []string{StateVolume, KeyVolume, podVolume} {
		if volumeIndex(spec, name) >= 0 {
			m.fail("the pod has a volume named %s already, which the injector adds: rename it", name)
		}
	}
	m.replaced = map[int]corev1.Volume{}
	m.port = freePort(spec)
	m.sc = m.securityContext()
	m.watch()
	if m.req.Restart {
		m.restart()
	}
	if len(m.errs) > 0 {
		return errors.Join(m.errs...)
	}
	m.targets()
	m.common()
	if !m.o.Native && m.req.Views() {
		m.warn("this API server runs no native sidecars: the app may start before hotreload has written its directories, and read them empty once")
	}
	return errors.Join(m.errs...)
}

// watch chooses the volumes to watch and adds their mounts and flags.
func (m *mutation) watch() {
	spec := &m.pod.Spec
	chosen := m.req.Volumes
	if chosen == nil {
		for _, v := range spec.Volumes {
			if watchable(v) {
				chosen = append(chosen, v.Name)
			}
		}
	} else {
		for _, name := range chosen {
			i := volumeIndex(spec, name)
			switch {
			case i < 0:
				m.fail("%s: the pod has no volume %q", AnnotationVolumes, name)
			case !kubeletVolume(spec.Volumes[i]):
				m.fail("%s: volume %q is not a ConfigMap, Secret, projected or downwardAPI volume, which the kubelet updates", AnnotationVolumes, name)
			}
		}
		if len(m.errs) > 0 {
			return
		}
	}
	used := map[string]bool{stateDir: true, keyDir: true, "/hotreload": true}
	refs := map[string]bool{}
	for _, name := range chosen {
		i := volumeIndex(spec, name)
		v := spec.Volumes[i]
		p, subPathOnly := appMountPath(spec.Containers, name, m.app.Name)
		switch {
		case p == "" && subPathOnly != "":
			m.warn("volume %s: container %s mounts it with subPath, which never updates: hotreload does not watch it; mount the whole volume to have it reloaded", name, subPathOnly)
			continue
		case p == "" && m.req.Volumes != nil:
			m.fail("%s: no container mounts volume %q", AnnotationVolumes, name)
			continue
		case p == "":
			continue // mounted by no container: nothing to reload
		}
		if strings.Contains(p, ",") || nestedAny(p, used) {
			p = path.Join(volumesDir, name)
		}
		used[p] = true
		if m.req.Views() && (v.ConfigMap != nil || v.Secret != nil) {
			m.view(i, v, p, refs)
		} else if m.req.Restart {
			m.warn("volume %s: a %s volume cannot be restarted into by revision, only ConfigMap and Secret volumes: the app reads it as the kubelet updates it, and hotreload does not restart for it", name, volumeKind(v))
			continue
		} else {
			m.mounts = append(m.mounts, corev1.VolumeMount{Name: name, MountPath: p, ReadOnly: true})
			m.args = append(m.args, "--volume-dir="+p)
		}
		m.watched = append(m.watched, name)
		if w := m.readable(v); w != "" {
			m.warn("volume %s: %s", name, w)
		}
	}
	if len(m.watched) == 0 && !m.req.Restart {
		m.fail("the pod mounts no ConfigMap, Secret or projected volume whole: there is nothing to watch (name the volumes with %s)", AnnotationVolumes)
	}
}

// view turns volume i, mounted by the app at p, into the app's directory:
// the volume keeps its name and becomes an emptyDir the sidecar writes;
// its source and the stable copy are mounted under /hotreload/ in the
// sidecar only (docs/design/fleet.md, "The injector").
func (m *mutation) view(i int, v corev1.Volume, p string, refs map[string]bool) {
	kind, obj, items := "configmap", "", 0
	var stable corev1.VolumeSource
	empty := &corev1.EmptyDirVolumeSource{}
	if v.ConfigMap != nil {
		obj, items = v.ConfigMap.Name, len(v.ConfigMap.Items)
		stable.ConfigMap = &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: obj + stableSuffix},
			DefaultMode:          v.ConfigMap.DefaultMode,
			Optional:             ptr.To(true),
		}
	} else {
		kind, obj, items = "secret", v.Secret.SecretName, len(v.Secret.Items)
		stable.Secret = &corev1.SecretVolumeSource{
			SecretName:  obj + stableSuffix,
			DefaultMode: v.Secret.DefaultMode,
			Optional:    ptr.To(true),
		}
		// A Secret's content stays off the node's disk, as the kubelet
		// keeps a Secret volume.
		empty.Medium = corev1.StorageMediumMemory
	}
	ref := kind + "/" + obj
	switch {
	case items > 0:
		m.fail("volume %s projects some keys only (items): the revisions of a rollout are whole objects; mount the whole %s", v.Name, kind)
		return
	case len(obj)+len(stableSuffix) > 253:
		m.fail("volume %s: the %s's name is too long for its stable copy, NAME%s (253 characters at most)", v.Name, kind, stableSuffix)
		return
	case refs[ref]:
		m.fail("volumes of the pod mount %s twice: mount it once", ref)
		return
	case strings.HasPrefix(p, "/hotreload/"):
		m.fail("volume %s is mounted at %s, under /hotreload/, where the injector mounts its own", v.Name, p)
		return
	}
	refs[ref] = true
	src := volumeName("hotreload-src-", v.Name)
	stb := volumeName("hotreload-stable-", v.Name)
	for _, name := range []string{src, stb} {
		if volumeIndex(&m.pod.Spec, name) >= 0 {
			m.fail("the pod has a volume named %s already, which the injector adds: rename it", name)
			return
		}
	}
	m.replaced[i] = corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{EmptyDir: empty}}
	m.volumes = append(m.volumes,
		corev1.Volume{Name: src, VolumeSource: v.VolumeSource},
		corev1.Volume{Name: stb, VolumeSource: stable})
	srcPath, stablePath := path.Join(sourceDir, v.Name), path.Join(stableDir, v.Name)
	m.mounts = append(m.mounts,
		corev1.VolumeMount{Name: v.Name, MountPath: p},
		corev1.VolumeMount{Name: src, MountPath: srcPath, ReadOnly: true},
		corev1.VolumeMount{Name: stb, MountPath: stablePath, ReadOnly: true})
	m.args = append(m.args, fmt.Sprintf("--view=ref=%s,source=%s,dir=%s,stable=%s", ref, srcPath, p, stablePath))
}

// restart adds the flags of restart mode: the views of the app's env refs,
// and the grace of SIGTERM.
func (m *mutation) restart() {
	covered := map[string]bool{}
	for _, a := range m.args {
		if r, ok := strings.CutPrefix(a, "--view=ref="); ok {
			covered[r[:strings.IndexByte(r, ',')]] = true
		}
	}
	for _, ref := range envRefs(m.app) {
		if !covered[ref] {
			covered[ref] = true
			m.args = append(m.args, "--view=ref="+ref)
		}
	}
	if len(covered) == 0 {
		m.fail("%s: container %s reads no ConfigMap or Secret, neither from a volume nor from env: there is nothing to restart for", AnnotationRestart, m.app.Name)
		return
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if g := m.pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = min(max(*g, 1), 3600)
	}
	// The drain takes the pod out of its Services before its app stops:
	// the sidecar's readiness probe (every second, one failure: see
	// container) sees /-/ready fail within a second, and the endpoints
	// follow in about another.
	m.args = append(m.args, "--restart-container", "--restart-grace="+(time.Duration(grace)*time.Second).String(), "--restart-drain="+restartDrain.String())
	m.drains = true
}

// restartDrain is the injector's --restart-drain: above its readiness
// probe's period times its failure threshold (1 s), plus the time the
// endpoints take to follow.
const restartDrain = 3 * time.Second

// targets adds how the sidecar tells the app.
func (m *mutation) targets() {
	for _, u := range m.req.ReloadURLs {
		m.args = append(m.args, "--webhook-url="+u)
	}
	if m.req.Signal != "" {
		m.args = append(m.args, "--signal="+m.req.Signal)
	}
	if m.req.Signals() {
		if m.req.ProcessName != "" {
			m.args = append(m.args, "--process-name="+m.req.ProcessName)
		} else {
			m.args = append(m.args, "--process-cmdline="+m.req.ProcessCmdline)
		}
	}
}

// common adds what every sidecar has: the state file, the content key,
// the annotations file for views, the port.
func (m *mutation) common() {
	m.volumes = append(m.volumes, corev1.Volume{Name: StateVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Mi"))},
	}})
	m.mounts = append(m.mounts, corev1.VolumeMount{Name: StateVolume, MountPath: stateDir})
	m.args = append(m.args, "--state-file="+stateFile)
	if m.o.ContentKeySecret != "" {
		m.volumes = append(m.volumes, corev1.Volume{Name: KeyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: m.o.ContentKeySecret,
			// Readable by the sidecar whatever its user; no other
			// container mounts it.
			DefaultMode: ptr.To[int32](0o444),
		}}})
		m.mounts = append(m.mounts, corev1.VolumeMount{Name: KeyVolume, MountPath: keyDir, ReadOnly: true})
		m.args = append(m.args, "--content-key-file="+path.Join(keyDir, KeySecretKey))
	}
	if m.req.Views() {
		m.volumes = append(m.volumes, corev1.Volume{Name: podVolume, VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{
			Items: []corev1.DownwardAPIVolumeFile{{Path: "annotations", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations"}}},
		}}})
		m.mounts = append(m.mounts, corev1.VolumeMount{Name: podVolume, MountPath: podDir, ReadOnly: true})
		m.args = append(m.args, "--pod-annotations="+path.Join(podDir, "annotations"))
	}
	if m.port != DefaultPort {
		m.args = append(m.args, fmt.Sprintf("--web.listen-address=:%d", m.port))
	}
}

// securityContext is the examples' hardened one, as the user that may
// signal the app when it must.
func (m *mutation) securityContext() *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](defaultUID),
		RunAsGroup:               ptr.To[int64](defaultUID),
		ReadOnlyRootFilesystem:   ptr.To(true),
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if !m.req.Signals() {
		return sc
	}
	uid, gid := appUser(&m.pod.Spec, m.app)
	switch {
	case uid == nil && m.req.RunAsUser == nil:
		m.fail("%s: container %s sets no runAsUser (its image decides), so which user may signal it is unknown: set %s to its user id, or runAsUser", signalOrRestart(m.req), m.app.Name, AnnotationRunAsUser)
		return sc
	case uid == nil:
		uid = m.req.RunAsUser
	case m.req.RunAsUser != nil && *m.req.RunAsUser != *uid:
		m.warn("%s %d differs from container %s's runAsUser %d: hotreload runs as %d, the user the app runs as", AnnotationRunAsUser, *m.req.RunAsUser, m.app.Name, *uid, *uid)
	}
	if *uid == 0 {
		// kill(2) needs the same user or CAP_KILL, which a non-root
		// container never has in effect: root with KILL alone.
		sc.RunAsNonRoot = ptr.To(false)
		sc.RunAsUser = ptr.To[int64](0)
		sc.RunAsGroup = ptr.To[int64](0)
		sc.Capabilities.Add = []corev1.Capability{"KILL"}
		return sc
	}
	sc.RunAsUser = ptr.To(*uid)
	if gid != nil {
		sc.RunAsGroup = ptr.To(*gid)
	}
	return sc
}

// readable warns about a Secret volume whose files the sidecar's user
// cannot read: the kubelet makes them root's (and the fsGroup's).
func (m *mutation) readable(v corev1.Volume) string {
	if v.Secret == nil || v.Secret.DefaultMode == nil {
		return ""
	}
	mode := *v.Secret.DefaultMode
	psc := m.pod.Spec.SecurityContext
	switch {
	case mode&0o004 != 0, *m.sc.RunAsUser == 0:
		return ""
	case psc != nil && psc.FSGroup != nil && mode&0o040 != 0:
		return ""
	}
	return fmt.Sprintf("defaultMode %#o lets hotreload (user %d) not read its files, which the kubelet makes root's: set the pod's fsGroup with a mode the group may read (0440), or a mode others may read", mode, *m.sc.RunAsUser)
}

// container is the sidecar.
func (m *mutation) container() corev1.Container {
	ready := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/-/ready", Port: intstr.FromString(PortName)}}}
	res := DefaultResources()
	if m.o.Resources != nil {
		res = *m.o.Resources
	}
	c := corev1.Container{
		Name:            ContainerName,
		Image:           m.o.Image,
		ImagePullPolicy: m.o.ImagePullPolicy,
		Args:            m.args,
		Ports:           []corev1.ContainerPort{{Name: PortName, ContainerPort: m.port, Protocol: corev1.ProtocolTCP}},
		LivenessProbe:   &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/-/healthy", Port: intstr.FromString(PortName)}}},
		ReadinessProbe:  ready,
		Resources:       res,
		SecurityContext: m.sc,
		VolumeMounts:    m.mounts,
	}
	if m.drains {
		// A copy: the startup probe below shares ready's handler.
		c.ReadinessProbe = &corev1.Probe{ProbeHandler: ready.ProbeHandler, PeriodSeconds: 1, FailureThreshold: 1}
	}
	if m.o.Native {
		c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		// The kubelet starts the next container once this succeeds: the
		// app starts with its directories written and watched. Up to two
		// minutes.
		c.StartupProbe = &corev1.Probe{
			ProbeHandler:     ready.ProbeHandler,
			PeriodSeconds:    1,
			FailureThreshold: 120,
		}
	}
	return c
}

// patch is the JSON patch of the whole mutation.
func (m *mutation) patch() []Op {
	spec := &m.pod.Spec
	var ops []Op
	c := m.container()
	switch {
	case m.o.Native && len(spec.InitContainers) == 0:
		ops = append(ops, Op{"add", "/spec/initContainers", []corev1.Container{c}})
	case m.o.Native:
		// First, so that init containers after it see the app's
		// directories written.
		ops = append(ops, Op{"add", "/spec/initContainers/0", c})
	default:
		ops = append(ops, Op{"add", "/spec/containers/-", c})
	}
	idx := make([]int, 0, len(m.replaced))
	for i := range m.replaced {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		ops = append(ops, Op{"replace", "/spec/volumes/" + strconv.Itoa(i), m.replaced[i]})
	}
	if len(spec.Volumes) == 0 {
		ops = append(ops, Op{"add", "/spec/volumes", m.volumes})
	} else {
		for _, v := range m.volumes {
			ops = append(ops, Op{"add", "/spec/volumes/-", v})
		}
	}
	if m.req.Signals() && (spec.ShareProcessNamespace == nil || !*spec.ShareProcessNamespace) {
		ops = append(ops, Op{"add", "/spec/shareProcessNamespace", true})
	}
	add := map[string]string{AnnotationInjected: m.mode()}
	if _, ok := m.pod.Annotations[AnnotationNudge]; !ok {
		add[AnnotationNudge] = "true"
	}
	if m.pod.Annotations == nil {
		ops = append(ops, Op{"add", "/metadata/annotations", add})
	} else {
		for _, k := range []string{AnnotationInjected, AnnotationNudge} {
			if v, ok := add[k]; ok {
				ops = append(ops, Op{"add", "/metadata/annotations/" + escapePointer(k), v})
			}
		}
	}
	return ops
}

// watchable reports whether a volume is one the sidecar watches unless
// told otherwise: a ConfigMap, a Secret, or a projected volume of
// ConfigMaps and Secrets. A projected volume with a service account token
// (kube-api-access-*) is left out: the kubelet rotates the token by
// itself, and no app reloads for it.
func watchable(v corev1.Volume) bool {
	switch {
	case v.ConfigMap != nil, v.Secret != nil:
		return true
	case v.Projected != nil:
		objects := false
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil || s.ClusterTrustBundle != nil || s.PodCertificate != nil {
				return false
			}
			objects = objects || s.ConfigMap != nil || s.Secret != nil
		}
		return objects
	}
	return false
}

// kubeletVolume reports whether the kubelet updates the volume in a
// running pod: the volumes that an annotation may name.
func kubeletVolume(v corev1.Volume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.Projected != nil || v.DownwardAPI != nil
}

func volumeKind(v corev1.Volume) string {
	switch {
	case v.Projected != nil:
		return "projected"
	case v.DownwardAPI != nil:
		return "downwardAPI"
	}
	return "other"
}

// appMountPath is where a container mounts the volume whole: the app
// container's path, else the first container's. subPathOnly names a
// container that mounts it with subPath only, when none mounts it whole.
func appMountPath(cs []corev1.Container, volume, app string) (p, subPathOnly string) {
	for pass := range 2 {
		for _, c := range cs {
			if pass == 0 && c.Name != app {
				continue
			}
			for _, vm := range c.VolumeMounts {
				if vm.Name != volume {
					continue
				}
				if vm.SubPath != "" || vm.SubPathExpr != "" {
					if subPathOnly == "" {
						subPathOnly = c.Name
					}
					continue
				}
				return path.Clean(vm.MountPath), ""
			}
		}
	}
	return "", subPathOnly
}

// nestedAny reports whether p is one of the paths or lies inside one, or
// around one.
func nestedAny(p string, paths map[string]bool) bool {
	for q := range paths {
		if p == q || strings.HasPrefix(p, q+"/") || strings.HasPrefix(q, p+"/") || p == "/" {
			return true
		}
	}
	return false
}

// appUser is the user and group the app's container runs as, when the pod
// says; nil when its image decides.
func appUser(spec *corev1.PodSpec, c *corev1.Container) (uid, gid *int64) {
	if psc := spec.SecurityContext; psc != nil {
		uid, gid = psc.RunAsUser, psc.RunAsGroup
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = sc.RunAsGroup
		}
	}
	return uid, gid
}

// envRefs lists the ConfigMaps and Secrets a container reads into its
// environment, as view refs, each once.
func envRefs(c *corev1.Container) []string {
	var refs []string
	add := func(kind, name string) {
		if r := kind + "/" + name; name != "" && !slices.Contains(refs, r) {
			refs = append(refs, r)
		}
	}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			add("configmap", ef.ConfigMapRef.Name)
		}
		if ef.SecretRef != nil {
			add("secret", ef.SecretRef.Name)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			add("configmap", r.Name)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			add("secret", r.Name)
		}
	}
	return refs
}

// freePort is DefaultPort, or the next port that no container of the pod
// declares.
func freePort(spec *corev1.PodSpec) int32 {
	taken := map[int32]bool{}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				taken[p.ContainerPort] = true
			}
		}
	}
	p := int32(DefaultPort)
	for taken[p] {
		p++
	}
	return p
}

func volumeIndex(spec *corev1.PodSpec, name string) int {
	return slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == name })
}

// volumeName is prefix+name, shortened with a hash of name to fit the 63
// characters of a volume's name.
func volumeName(prefix, name string) string {
	if len(prefix)+len(name) <= 63 {
		return prefix + name
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:4])
	return prefix + strings.TrimRight(name[:63-len(prefix)-len(h)-1], "-") + "-" + h
}

func containerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}
