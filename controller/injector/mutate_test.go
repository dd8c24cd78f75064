package injector

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/hotreload/hotreload/internal/config"
	"github.com/hotreload/hotreload/test/support/podpatch"
)

const testImage = "ghcr.io/hotreload/hotreload:v0.1.0"

// podOf is a pod of one app container that mounts a ConfigMap volume
// "config" at /etc/app and has the service account volume the API server
// adds, changed by each of fns.
func podOf(annotations map[string]string, fns ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "app-", Namespace: "shop", Annotations: annotations},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example.com/app:1",
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: "/etc/app"},
					{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
				}}}},
			},
		},
	}
	for _, fn := range fns {
		fn(p)
	}
	return p
}

func reloadURL() map[string]string {
	return map[string]string{AnnotationReloadURL: "http://127.0.0.1:9090/-/reload"}
}

func withVolume(v corev1.Volume, mountPath string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v)
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: mountPath})
	}
}

func secretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}}
}

func appUID(uid int64) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To(uid)}
	}
}

// inject parses the pod's annotations, mutates it and applies the patch as
// the API server would: the pod as admitted.
func inject(t *testing.T, p *corev1.Pod, o Sidecar) (*corev1.Pod, Result) {
	t.Helper()
	req, _, err := ParseAnnotations(p.Annotations)
	if err != nil {
		t.Fatalf("annotations: %v", err)
	}
	if o.Image == "" {
		o.Image = testImage
	}
	res, err := Mutate(p, req, o)
	if err != nil {
		t.Fatalf("Mutate: %v", err)
	}
	return applyPatch(t, p, res.Patch), res
}

func applyPatch(t *testing.T, p *corev1.Pod, ops []Op) *corev1.Pod {
	t.Helper()
	got, err := podpatch.Apply(p, ops)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sidecar returns the hotreload container of an admitted pod, checking that
// there is exactly one, and whether it is native.
func sidecar(t *testing.T, p *corev1.Pod) (corev1.Container, bool) {
	t.Helper()
	var found []corev1.Container
	native := false
	for _, c := range p.Spec.InitContainers {
		if c.Name == ContainerName {
			found, native = append(found, c), true
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == ContainerName {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d hotreload containers, want 1", len(found))
	}
	return found[0], native
}

// parseSidecar parses the sidecar's args with the sidecar's own parser, as
// it will at start.
func parseSidecar(t *testing.T, c corev1.Container) *config.Config {
	t.Helper()
	cfg, err := config.Parse(c.Args, "test", io.Discard, func(int) { t.Fatalf("terminated") })
	if err != nil {
		t.Fatalf("the sidecar refuses its args %q: %v", c.Args, err)
	}
	if _, err := config.NewTargets(cfg); err != nil {
		t.Fatalf("the sidecar refuses its targets %q: %v", c.Args, err)
	}
	return cfg
}

func mountOf(c corev1.Container, volume string) (corev1.VolumeMount, bool) {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m, true
		}
	}
	return corev1.VolumeMount{}, false
}

func volumeOf(p *corev1.Pod, name string) (corev1.Volume, bool) {
	for _, v := range p.Spec.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.Volume{}, false
}

func TestMutateReloadURL(t *testing.T) {
	for _, native := range []bool{true, false} {
		t.Run(map[bool]string{true: "native", false: "classic"}[native], func(t *testing.T) {
			p := podOf(reloadURL(), withVolume(secretVolume("creds", "app-creds"), "/etc/creds"))
			got, res := inject(t, p, Sidecar{Native: native})
			c, isNative := sidecar(t, got)
			if isNative != native {
				t.Errorf("native = %v, want %v", isNative, native)
			}
			cfg := parseSidecar(t, c)
			if want := []string{"/etc/app", "/etc/creds"}; !slices.Equal(cfg.VolumeDirs, want) {
				t.Errorf("volume dirs %q, want %q (not the service account's)", cfg.VolumeDirs, want)
			}
			if !slices.Equal(res.Watched, []string{"config", "creds"}) {
				t.Errorf("watched %q", res.Watched)
			}
			if !slices.Equal(cfg.WebhookURLs, []string{"http://127.0.0.1:9090/-/reload"}) || cfg.StateFile != stateFile {
				t.Errorf("webhook %q, state file %q", cfg.WebhookURLs, cfg.StateFile)
			}
			for _, vol := range []string{"config", "creds"} {
				if m, ok := mountOf(c, vol); !ok || !m.ReadOnly || m.SubPath != "" {
					t.Errorf("mount of %s = %+v, %v: want whole and read-only", vol, m, ok)
				}
			}
			if _, ok := mountOf(c, "kube-api-access-x7k2p"); ok {
				t.Error("the sidecar mounts the service account token")
			}
			if v, ok := volumeOf(got, StateVolume); !ok || v.EmptyDir == nil || v.EmptyDir.SizeLimit.String() != "1Mi" {
				t.Errorf("state volume %+v", v)
			}
			if native {
				if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
					t.Error("a native sidecar without restartPolicy Always")
				}
				if c.StartupProbe == nil || c.StartupProbe.HTTPGet == nil || c.StartupProbe.HTTPGet.Path != "/-/ready" {
					t.Errorf("startup probe %+v, want /-/ready", c.StartupProbe)
				}
				if len(got.Spec.Containers) != 1 {
					t.Errorf("%d containers, want the app's alone", len(got.Spec.Containers))
				}
			} else {
				if c.RestartPolicy != nil || c.StartupProbe != nil {
					t.Error("a classic sidecar with restartPolicy or a startup probe")
				}
				if got.Spec.Containers[0].Name != "app" {
					t.Error("the app is no longer the first container (kubectl's default)")
				}
			}
			if c.LivenessProbe.HTTPGet.Path != "/-/healthy" || c.ReadinessProbe.HTTPGet.Path != "/-/ready" {
				t.Errorf("probes %+v %+v", c.LivenessProbe, c.ReadinessProbe)
			}
			if c.Ports[0].Name != PortName || c.Ports[0].ContainerPort != DefaultPort {
				t.Errorf("port %+v", c.Ports)
			}
			if c.Resources.Requests.Memory().String() != "16Mi" || c.Resources.Limits.Memory().String() != "32Mi" || c.Resources.Requests.Cpu().String() != "5m" {
				t.Errorf("resources %+v", c.Resources)
			}
			sc := c.SecurityContext
			if !*sc.RunAsNonRoot || *sc.RunAsUser != defaultUID || *sc.RunAsGroup != defaultUID || !*sc.ReadOnlyRootFilesystem ||
				*sc.AllowPrivilegeEscalation || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || sc.Capabilities.Add != nil ||
				sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("security context %+v", sc)
			}
			if got.Spec.ShareProcessNamespace != nil {
				t.Error("shareProcessNamespace set for a webhook")
			}
			want := map[string]string{AnnotationInjected: res.Mode, AnnotationNudge: "true", AnnotationReloadURL: "http://127.0.0.1:9090/-/reload"}
			if len(got.Annotations) != len(want) {
				t.Errorf("annotations %v, want %v", got.Annotations, want)
			}
			for k, v := range want {
				if got.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
				}
			}
			if len(res.Warnings) != 0 {
				t.Errorf("warnings %q", res.Warnings)
			}
		})
	}
}

func TestMutateNativeGoesFirst(t *testing.T) {
	p := podOf(reloadURL(), func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "migrate", Image: "migrate:1"}}
	})
	got, _ := inject(t, p, Sidecar{Native: true})
	if names := containerNames(got.Spec.InitContainers); names != "hotreload, migrate" {
		t.Errorf("init containers %s, want hotreload first", names)
	}
}

func TestMutateSignal(t *testing.T) {
	sig := func(extra map[string]string) map[string]string {
		a := map[string]string{AnnotationSignal: "SIGHUP", AnnotationProcessName: "nginx"}
		for k, v := range extra {
			a[k] = v
		}
		return a
	}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		uid, gid int64
		root     bool
		warning  string
	}{
		{name: "the container's user", pod: podOf(sig(nil), func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{RunAsUser: ptr.To[int64](101), RunAsGroup: ptr.To[int64](102)}
		}), uid: 101, gid: 102},
		{name: "the pod's user", pod: podOf(sig(nil), func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)}
		}), uid: 1000, gid: defaultUID},
		{name: "the annotation's user", pod: podOf(sig(map[string]string{AnnotationRunAsUser: "101"})), uid: 101, gid: defaultUID},
		{name: "the container's user over the annotation's", pod: podOf(sig(map[string]string{AnnotationRunAsUser: "7"}), appUID(101)),
			uid: 101, gid: defaultUID, warning: "differs"},
		{name: "root", pod: podOf(sig(nil), appUID(0)), root: true},
		{name: "the named container's user", pod: podOf(sig(map[string]string{AnnotationContainer: "nginx"}), func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "nginx", Image: "nginx", SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To[int64](101)}})
		}), uid: 101, gid: defaultUID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, res := inject(t, tt.pod, Sidecar{Native: true})
			c, _ := sidecar(t, got)
			cfg := parseSidecar(t, c)
			if cfg.Signal.Signal != "SIGHUP" || cfg.Signal.ProcessName != "nginx" || len(cfg.WebhookURLs) != 0 {
				t.Errorf("signal %+v", cfg.Signal)
			}
			if got.Spec.ShareProcessNamespace == nil || !*got.Spec.ShareProcessNamespace {
				t.Error("no shareProcessNamespace")
			}
			sc := c.SecurityContext
			if tt.root {
				if *sc.RunAsUser != 0 || *sc.RunAsNonRoot || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"KILL"}) || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
					t.Errorf("security context %+v: want root with KILL alone", sc)
				}
			} else if *sc.RunAsUser != tt.uid || *sc.RunAsGroup != tt.gid || !*sc.RunAsNonRoot || sc.Capabilities.Add != nil {
				t.Errorf("user %d:%d, want %d:%d, non-root, no capability", *sc.RunAsUser, *sc.RunAsGroup, tt.uid, tt.gid)
			}
			if w := strings.Join(res.Warnings, "\n"); (tt.warning == "") != (w == "") || !strings.Contains(w, tt.warning) {
				t.Errorf("warnings %q, want one with %q", w, tt.warning)
			}
		})
	}
}

func TestMutateVolumes(t *testing.T) {
	projected := func(name string, sources ...corev1.VolumeProjection) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}}
	}
	cmSource := corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}}
	secretSource := corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}}
	tests := []struct {
		name     string
		pod      *corev1.Pod
		dirs     []string
		warnings []string
	}{
		{name: "a projected volume of a ConfigMap and a Secret", pod: podOf(reloadURL(), withVolume(projected("both", cmSource, secretSource), "/etc/both")),
			dirs: []string{"/etc/app", "/etc/both"}},
		{name: "named by the annotation", pod: podOf(map[string]string{AnnotationReloadURL: "http://127.0.0.1:9090/-/reload", AnnotationVolumes: "creds"},
			withVolume(secretVolume("creds", "app-creds"), "/etc/creds")), dirs: []string{"/etc/creds"}},
		{name: "a downwardAPI volume named by the annotation", pod: podOf(map[string]string{AnnotationReloadURL: "http://127.0.0.1:9090/-/reload", AnnotationVolumes: "config, labels"},
			withVolume(corev1.Volume{Name: "labels", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}}, "/etc/labels")),
			dirs: []string{"/etc/app", "/etc/labels"}},
		{name: "a subPath mount is not watched", pod: podOf(reloadURL(), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("creds", "app-creds"))
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "creds", MountPath: "/etc/creds/password", SubPath: "password"})
		}), dirs: []string{"/etc/app"}, warnings: []string{"volume creds: container app mounts it with subPath, which never updates"}},
		{name: "a volume no container mounts is not watched", pod: podOf(reloadURL(), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("unused", "x"))
		}), dirs: []string{"/etc/app"}},
		{name: "mounted by another container", pod: podOf(reloadURL(), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("tls", "tls"))
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "proxy", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/tls"}}})
		}), dirs: []string{"/etc/app", "/tls"}},
		{name: "the app's path where another container's is the same", pod: podOf(reloadURL(), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, secretVolume("tls", "tls"))
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "proxy", VolumeMounts: []corev1.VolumeMount{{Name: "tls", MountPath: "/etc/app"}}})
		}), dirs: []string{"/etc/app", "/hotreload/volumes/tls"}},
		{name: "a nested mount", pod: podOf(reloadURL(), withVolume(secretVolume("creds", "app-creds"), "/etc/app/creds")),
			dirs: []string{"/etc/app", "/hotreload/volumes/creds"}},
		{name: "a Secret that only root may read", pod: podOf(reloadURL(), withVolume(corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "c", DefaultMode: ptr.To[int32](0o400)}}}, "/etc/creds")),
			dirs: []string{"/etc/app", "/etc/creds"}, warnings: []string{"volume creds: defaultMode 0400"}},
		{name: "a Secret its group may read, with fsGroup", pod: podOf(reloadURL(), func(p *corev1.Pod) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
		}, withVolume(corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "c", DefaultMode: ptr.To[int32](0o440)}}}, "/etc/creds")),
			dirs: []string{"/etc/app", "/etc/creds"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, res := inject(t, tt.pod, Sidecar{Native: true})
			c, _ := sidecar(t, got)
			cfg := parseSidecar(t, c)
			if !slices.Equal(cfg.VolumeDirs, tt.dirs) {
				t.Errorf("volume dirs %q, want %q", cfg.VolumeDirs, tt.dirs)
			}
			if len(res.Warnings) != len(tt.warnings) {
				t.Fatalf("warnings %q, want %q", res.Warnings, tt.warnings)
			}
			for i, w := range tt.warnings {
				if !strings.HasPrefix(res.Warnings[i], w) {
					t.Errorf("warning %q, want %q...", res.Warnings[i], w)
				}
			}
		})
	}
}

func TestMutateRollout(t *testing.T) {
	a := map[string]string{AnnotationReloadURL: "http://127.0.0.1:8080/reload", AnnotationRollout: "true"}
	p := podOf(a, withVolume(secretVolume("creds", "app-creds"), "/etc/creds"), func(p *corev1.Pod) {
		p.Spec.Volumes[0].ConfigMap.DefaultMode = ptr.To[int32](0o640)
	})
	got, res := inject(t, p, Sidecar{Native: true})
	c, _ := sidecar(t, got)
	cfg := parseSidecar(t, c)
	if len(cfg.VolumeDirs) != 0 || len(cfg.Fleet.Views) != 2 || cfg.Fleet.PodAnnotations != "/hotreload/pod/annotations" {
		t.Fatalf("volume dirs %q, views %+v, annotations %q", cfg.VolumeDirs, cfg.Fleet.Views, cfg.Fleet.PodAnnotations)
	}
	for i, want := range []struct{ ref, vol, dir, source string }{
		{"configmap/app-config", "config", "/etc/app", "app-config"},
		{"secret/app-creds", "creds", "/etc/creds", "app-creds"},
	} {
		v := cfg.Fleet.Views[i]
		if v.Ref.String() != want.ref || v.Dir != want.dir || v.Source != "/hotreload/source/"+want.vol || v.Stable != "/hotreload/stable/"+want.vol {
			t.Errorf("view %d = %+v, want %+v", i, v, want)
		}
		// The volume keeps its name, so the app's mount is unchanged, and
		// becomes the directory the sidecar writes.
		vol, _ := volumeOf(got, want.vol)
		if vol.EmptyDir == nil || vol.ConfigMap != nil || vol.Secret != nil {
			t.Errorf("volume %s = %+v, want an emptyDir", want.vol, vol.VolumeSource)
		}
		if secret := strings.HasPrefix(want.ref, "secret/"); secret != (vol.EmptyDir != nil && vol.EmptyDir.Medium == corev1.StorageMediumMemory) {
			t.Errorf("volume %s medium %q: a Secret's copy stays in memory, a ConfigMap's on disk", want.vol, vol.EmptyDir.Medium)
		}
		if m, ok := mountOf(c, want.vol); !ok || m.ReadOnly || m.MountPath != want.dir {
			t.Errorf("the sidecar's mount of %s = %+v, want %s read-write", want.vol, m, want.dir)
		}
		src, _ := volumeOf(got, "hotreload-src-"+want.vol)
		stable, _ := volumeOf(got, "hotreload-stable-"+want.vol)
		if strings.HasPrefix(want.ref, "configmap/") {
			if src.ConfigMap == nil || src.ConfigMap.Name != want.source || *src.ConfigMap.DefaultMode != 0o640 {
				t.Errorf("source volume %+v, want the original", src.VolumeSource)
			}
			if stable.ConfigMap == nil || stable.ConfigMap.Name != want.source+"-hotreload-stable" || !*stable.ConfigMap.Optional || *stable.ConfigMap.DefaultMode != 0o640 {
				t.Errorf("stable volume %+v", stable.VolumeSource)
			}
		} else if src.Secret == nil || src.Secret.SecretName != want.source || stable.Secret == nil || stable.Secret.SecretName != want.source+"-hotreload-stable" || !*stable.Secret.Optional {
			t.Errorf("source %+v, stable %+v", src.VolumeSource, stable.VolumeSource)
		}
		for _, m := range []string{"hotreload-src-" + want.vol, "hotreload-stable-" + want.vol} {
			if vm, ok := mountOf(c, m); !ok || !vm.ReadOnly {
				t.Errorf("mount of %s = %+v", m, vm)
			}
		}
	}
	if m, ok := mountOf(got.Spec.Containers[0], "config"); !ok || m.MountPath != "/etc/app" {
		t.Errorf("the app's mount changed: %+v", m)
	}
	pod, _ := volumeOf(got, podVolume)
	if pod.DownwardAPI == nil || pod.DownwardAPI.Items[0].FieldRef.FieldPath != "metadata.annotations" || pod.DownwardAPI.Items[0].Path != "annotations" {
		t.Errorf("downwardAPI volume %+v", pod.VolumeSource)
	}
	if len(res.Warnings) != 0 {
		t.Errorf("warnings %q", res.Warnings)
	}
	// Classic: the app may start before the sidecar wrote its directory.
	_, res = inject(t, podOf(a), Sidecar{Native: false})
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "native sidecars") {
		t.Errorf("classic warnings %q", res.Warnings)
	}
}

func TestMutateRestart(t *testing.T) {
	a := map[string]string{AnnotationRestart: "true", AnnotationProcessName: "app"}
	p := podOf(a, appUID(10001), func(p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
		app := &p.Spec.Containers[0]
		app.EnvFrom = []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env-config"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}, // also the volume's
		}
		app.Env = []corev1.EnvVar{
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
			{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "env-config"}, Key: "mode"}}},
			{Name: "PLAIN", Value: "x"},
		}
	}, withVolume(corev1.Volume{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "x"}}},
	}}}}, "/etc/both"))
	got, res := inject(t, p, Sidecar{Native: true})
	c, _ := sidecar(t, got)
	cfg := parseSidecar(t, c)
	var refs []string
	for _, v := range cfg.Fleet.Views {
		refs = append(refs, v.Ref.String())
	}
	if want := []string{"configmap/app-config", "configmap/env-config", "secret/db"}; !slices.Equal(refs, want) {
		t.Errorf("views %q, want %q", refs, want)
	}
	if cfg.Fleet.Views[0].Stable == "" {
		t.Error("the volume's view has no stable copy, which restart mode needs")
	}
	if !cfg.Fleet.RestartContainer || cfg.Fleet.RestartGrace.String() != "45s" || cfg.Signal.ProcessName != "app" || len(cfg.VolumeDirs) != 0 {
		t.Errorf("restart %v, grace %s, process %q, volume dirs %q", cfg.Fleet.RestartContainer, cfg.Fleet.RestartGrace, cfg.Signal.ProcessName, cfg.VolumeDirs)
	}
	// Drained first: the readiness probe sees /-/ready fail within the
	// drain, so that the pod leaves its Services before the app stops.
	if rp := c.ReadinessProbe; cfg.Fleet.RestartDrain != restartDrain || rp == nil ||
		time.Duration(rp.PeriodSeconds*rp.FailureThreshold)*time.Second >= cfg.Fleet.RestartDrain {
		t.Errorf("--restart-drain %s with readiness probe %+v: want a drain the probe sees", cfg.Fleet.RestartDrain, rp)
	}
	if *c.SecurityContext.RunAsUser != 10001 || !*got.Spec.ShareProcessNamespace {
		t.Errorf("user %d, shareProcessNamespace %v", *c.SecurityContext.RunAsUser, got.Spec.ShareProcessNamespace)
	}
	if len(res.Warnings) != 1 || !strings.HasPrefix(res.Warnings[0], "volume both: a projected volume cannot be restarted into") {
		t.Errorf("warnings %q", res.Warnings)
	}
	// Env alone is enough.
	p = podOf(a, appUID(10001), func(p *corev1.Pod) {
		p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts = nil, nil
		p.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}}
	})
	got, _ = inject(t, p, Sidecar{Native: true})
	c, _ = sidecar(t, got)
	if cfg := parseSidecar(t, c); len(cfg.Fleet.Views) != 1 || cfg.Fleet.Views[0].Ref.String() != "secret/env" || cfg.Fleet.RestartGrace.String() != "30s" {
		t.Errorf("views %+v, grace %s", cfg.Fleet.Views, cfg.Fleet.RestartGrace)
	}
}

func TestMutateContentKeyAndPort(t *testing.T) {
	p := podOf(reloadURL(), func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9533}, {ContainerPort: 9534}}
	})
	got, _ := inject(t, p, Sidecar{Native: true, ContentKeySecret: "hotreload-content-key"})
	c, _ := sidecar(t, got)
	cfg := parseSidecar(t, c)
	if cfg.ContentKeyFile != "/etc/hotreload/key/key" {
		t.Errorf("content key file %q", cfg.ContentKeyFile)
	}
	v, _ := volumeOf(got, KeyVolume)
	if v.Secret == nil || v.Secret.SecretName != "hotreload-content-key" || *v.Secret.DefaultMode != 0o444 {
		t.Errorf("key volume %+v", v.VolumeSource)
	}
	if m, ok := mountOf(c, KeyVolume); !ok || !m.ReadOnly {
		t.Errorf("key mount %+v", m)
	}
	if _, ok := mountOf(got.Spec.Containers[0], KeyVolume); ok {
		t.Error("the app mounts the content key")
	}
	if c.Ports[0].ContainerPort != 9535 || cfg.ListenAddress != ":9535" {
		t.Errorf("port %d, listen %q: want the first free one, 9535", c.Ports[0].ContainerPort, cfg.ListenAddress)
	}
}

func TestMutateKeepsTheNudgeAnnotation(t *testing.T) {
	a := reloadURL()
	a[AnnotationNudge] = "false"
	got, _ := inject(t, podOf(a), Sidecar{})
	if got.Annotations[AnnotationNudge] != "false" {
		t.Errorf("nudge = %q, want the pod's false", got.Annotations[AnnotationNudge])
	}
}

func TestVolumeName(t *testing.T) {
	long := strings.Repeat("a", 60)
	got := volumeName("hotreload-stable-", long)
	if len(got) > 63 || !strings.HasPrefix(got, "hotreload-stable-aaaa") {
		t.Errorf("%q (%d characters)", got, len(got))
	}
	if other := volumeName("hotreload-stable-", long+"b"); other == got {
		t.Error("two names shortened to the same")
	}
	if got := volumeName("hotreload-src-", "config"); got != "hotreload-src-config" {
		t.Errorf("%q", got)
	}
}

func TestHasSidecar(t *testing.T) {
	tests := []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"none", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}, false},
		{"a container", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: "hotreload", Image: "x"}}}, true},
		{"an init container", corev1.PodSpec{InitContainers: []corev1.Container{{Name: "reloader", Image: "ghcr.io/hotreload/hotreload:v0.1.0"}}}, true},
		{"by digest", corev1.PodSpec{Containers: []corev1.Container{{Name: "r", Image: "registry:5000/hotreload@sha256:abc"}}}, true},
		{"the controller's image", corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "ghcr.io/hotreload/hotreload-controller:v0.1.0"}}}, false},
	}
	for _, tt := range tests {
		if got := HasSidecar(&tt.spec); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// Each problem with a pod is one error that says what to change; the pod
// gets no sidecar.
func TestMutateRefuses(t *testing.T) {
	sig := map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "nginx"}
	rollout := map[string]string{AnnotationReloadURL: "http://127.0.0.1:8080/", AnnotationRollout: "true"}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"a signal to an app whose user the image decides", podOf(sig), "container app sets no runAsUser (its image decides), so which user may signal it is unknown: set hotreload.dev/run-as-user"},
		{"no such container", podOf(map[string]string{AnnotationReloadURL: "http://x/", AnnotationContainer: "web"}), `hotreload.dev/container "web": the pod has no such container (it has app)`},
		{"no such volume", podOf(map[string]string{AnnotationReloadURL: "http://x/", AnnotationVolumes: "cfg"}), `hotreload.dev/volumes: the pod has no volume "cfg"`},
		{"a volume the kubelet does not update", podOf(map[string]string{AnnotationReloadURL: "http://x/", AnnotationVolumes: "data"},
			withVolume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}, "/data")), `volume "data" is not a ConfigMap, Secret, projected or downwardAPI volume`},
		{"nothing to watch", podOf(reloadURL(), func(p *corev1.Pod) { p.Spec.Containers[0].VolumeMounts = p.Spec.Containers[0].VolumeMounts[1:] }),
			"the pod mounts no ConfigMap, Secret or projected volume whole"},
		{"a volume name the injector uses", podOf(reloadURL(), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: StateVolume})
		}), "the pod has a volume named hotreload-state already"},
		{"a rollout of some keys", podOf(rollout, func(p *corev1.Pod) {
			p.Spec.Volumes[0].ConfigMap.Items = []corev1.KeyToPath{{Key: "a", Path: "a"}}
		}), "volume config projects some keys only (items)"},
		{"a rollout of one object twice", podOf(rollout, withVolume(corev1.Volume{Name: "again", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}}, "/etc/again")),
			"volumes of the pod mount configmap/app-config twice"},
		{"a rollout of a name too long for its stable copy", podOf(rollout, func(p *corev1.Pod) { p.Spec.Volumes[0].ConfigMap.Name = strings.Repeat("c", 240) }),
			"is too long for its stable copy"},
		{"a restart with nothing to restart for", podOf(map[string]string{AnnotationRestart: "true", AnnotationProcessName: "app"}, appUID(1), func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts = nil
		}), "container app reads no ConfigMap or Secret"},
		{"Windows", podOf(reloadURL(), func(p *corev1.Pod) { p.Spec.OS = &corev1.PodOS{Name: corev1.Windows} }), "hotreload runs on Linux only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _, err := ParseAnnotations(tt.pod.Annotations)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Mutate(tt.pod, req, Sidecar{Image: testImage, Native: true})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}
