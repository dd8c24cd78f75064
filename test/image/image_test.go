// Package image_test builds the container images with the Makefile's image
// targets from scratch (base images cannot be pulled everywhere) and checks
// what a cluster will run: the platforms, the user and its group, the
// entrypoint, the labels, and that the binary runs inside the image.
//
// Each test builds with buildah into a storage of its own (vfs, under a
// temporary directory), so nothing is left in the machine's storage.
package image_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/test/support/e2etest"
)

const (
	testVersion  = "v0.0.0-test"
	testRevision = "abc1234"
)

func need(t *testing.T, tool, why string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		e2etest.SkipOrFail(t, "%s not found: %s (apt-get install %s)", tool, why, tool)
	}
}

// store is a buildah storage of one test's own.
type store struct {
	flags []string // buildah's global flags that select it
}

func newStore(t *testing.T) *store {
	t.Helper()
	need(t, "buildah", "builds the images without a Docker engine")
	if testing.Short() {
		t.Skip("builds images; skipped with -short")
	}
	dir, err := os.MkdirTemp("", "hotreload-image-test-")
	if err != nil {
		t.Fatal(err)
	}
	s := &store{flags: []string{"--storage-driver", "vfs", "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run")}}
	t.Cleanup(func() {
		// Without root the layers' files belong to the user namespace's
		// uids: only buildah unshare can remove them.
		if os.Geteuid() != 0 {
			_ = exec.Command("buildah", "unshare", "rm", "-rf", dir).Run()
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove the test's buildah storage: %v", err)
		}
	})
	return s
}

func (s *store) buildah(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("buildah", append(slices.Clone(s.flags), args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// make runs a Makefile target with buildah into s, FROM scratch, with the
// test's version, and fails on a build argument that the Dockerfile does not
// declare or that it declares and gets no value for.
func (s *store) make(t *testing.T, target string, vars ...string) {
	t.Helper()
	args := append([]string{"-C", "../..", "--no-print-directory", target,
		"IMAGE_TOOL=buildah", "BUILDAH=buildah " + strings.Join(s.flags, " "),
		"BASE=scratch", "VERSION=" + testVersion, "REVISION=" + testRevision}, vars...)
	out, err := exec.Command("make", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args[3:], " "), err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// buildah's words for "--build-arg X that no ARG takes" and "ARG X that no --build-arg or --platform gives".
		if line := sc.Text(); strings.Contains(line, "were not consumed") || strings.Contains(line, "build argument") {
			t.Errorf("make %s: %s", target, line)
		}
	}
}

// config is the part of an image's OCI config that a cluster acts on.
type config struct {
	OS           string `json:"os"`
	Architecture string `json:"architecture"`
	Variant      string `json:"variant"`
	Config       struct {
		User       string            `json:"User"`
		Entrypoint []string          `json:"Entrypoint"`
		Cmd        []string          `json:"Cmd"`
		Labels     map[string]string `json:"Labels"`
	} `json:"config"`
}

func (s *store) config(t *testing.T, ref string) config {
	t.Helper()
	var img struct {
		OCIv1 config `json:"OCIv1"`
	}
	if err := json.Unmarshal([]byte(s.buildah(t, "inspect", "--type", "image", ref)), &img); err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return img.OCIv1
}

// files returns the regular files of the image ref, read from its layers.
func (s *store) files(t *testing.T, ref string) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	s.buildah(t, "push", "--quiet", ref, "dir:"+dir)
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Layers []struct {
			Digest string `json:"digest"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("manifest of %s: %v", ref, err)
	}
	files := map[string][]byte{}
	for _, l := range m.Layers {
		blob, err := os.ReadFile(filepath.Join(dir, strings.TrimPrefix(l.Digest, "sha256:")))
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = bytes.NewReader(blob)
		if bytes.HasPrefix(blob, []byte{0x1f, 0x8b}) {
			if r, err = gzip.NewReader(r); err != nil {
				t.Fatalf("layer %s of %s: %v", l.Digest, ref, err)
			}
		}
		tr := tar.NewReader(r)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %s of %s: %v", l.Digest, ref, err)
			}
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				files["/"+strings.TrimPrefix(h.Name, "./")] = b
			}
		}
	}
	return files
}

// run runs the image ref's binary with args, as buildah's chroot runs it
// (no runtime needed), and returns what it printed.
func (s *store) run(t *testing.T, ref string, args ...string) string {
	t.Helper()
	ctr := strings.TrimSpace(s.buildah(t, "from", "--quiet", ref))
	t.Cleanup(func() { _ = exec.Command("buildah", append(slices.Clone(s.flags), "rm", ctr)...).Run() })
	return s.buildah(t, append([]string{"run", "--isolation", "chroot", ctr, "--"}, args...)...)
}

// image is what one image target builds.
type image struct {
	binary string // the entrypoint's path
	title  string
	// free is a path the image must not hold: pods mount volumes there.
	free string
}

var (
	// The sidecar's views mount volumes under /hotreload/ (fleet.md).
	sidecar    = image{binary: "/usr/bin/hotreload", title: "hotreload", free: "/hotreload"}
	controller = image{binary: "/hotreload-controller", title: "hotreload-controller"}
)

// machine is what an ELF header says a binary runs on.
type machine struct {
	Machine   elf.Machine
	ByteOrder string
}

// machines are the ELF machines of the image platforms.
var machines = map[string]machine{
	"linux/amd64":   {elf.EM_X86_64, "LittleEndian"},
	"linux/arm64":   {elf.EM_AARCH64, "LittleEndian"},
	"linux/arm/v7":  {elf.EM_ARM, "LittleEndian"},
	"linux/ppc64le": {elf.EM_PPC64, "LittleEndian"},
	"linux/s390x":   {elf.EM_S390, "BigEndian"},
}

// check checks the config, the users and the binary of the image ref, built
// for platform, and runs the binary when this machine can.
func (s *store) check(t *testing.T, ref string, want image, platform string) {
	t.Helper()
	c := s.config(t, ref)
	if got := strings.TrimSuffix(c.OS+"/"+c.Architecture+"/"+c.Variant, "/"); got != platform {
		t.Errorf("%s: platform %s, want %s", ref, got, platform)
	}
	if c.Config.User != "65532:65532" {
		t.Errorf("%s: user = %q, want 65532:65532 (non-root, as distroless nonroot)", ref, c.Config.User)
	}
	if !slices.Equal(c.Config.Entrypoint, []string{want.binary}) || len(c.Config.Cmd) != 0 {
		t.Errorf("%s: entrypoint = %q cmd = %q, want exec form [\"%s\"] and no cmd, so pod args are the flags", ref, c.Config.Entrypoint, c.Config.Cmd, want.binary)
	}
	for k, v := range map[string]string{
		"org.opencontainers.image.title":    want.title,
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.source":   "https://github.com/hotreload/hotreload",
	} {
		if got := c.Config.Labels[k]; got != v {
			t.Errorf("%s: label %s = %q, want %q", ref, k, got, v)
		}
	}

	// The users: a pod that sets runAsUser but no runAsGroup gets the
	// group of the image's /etc/passwd, which must be 65532, not 0.
	files := s.files(t, ref)
	for path, line := range map[string]string{
		"/etc/passwd": "nonroot:x:65532:65532:",
		"/etc/group":  "nonroot:x:65532:",
	} {
		if b, ok := files[path]; !ok {
			t.Errorf("%s: no %s", ref, path)
		} else if !slices.ContainsFunc(strings.Split(string(b), "\n"), func(l string) bool { return strings.HasPrefix(l, line) }) {
			t.Errorf("%s: %s has no line %q...:\n%s", ref, path, line, b)
		}
	}
	if want.free != "" {
		for path := range files {
			if path == want.free || strings.HasPrefix(path, want.free+"/") {
				t.Errorf("%s: holds %s, where pods mount volumes (runc fails: not a directory)", ref, path)
			}
		}
	}
	bin, ok := files[want.binary]
	if !ok {
		t.Fatalf("%s: no %s", ref, want.binary)
	}
	t.Logf("%s: %s, %s %d bytes", ref, platform, want.binary, len(bin))

	// The binary is the platform's, not another platform's under its name.
	if f, err := elf.NewFile(bytes.NewReader(bin)); err != nil {
		t.Errorf("%s: %s is not an ELF binary: %v", ref, want.binary, err)
	} else if got, wantM := (machine{f.Machine, f.ByteOrder.String()}), machines[platform]; got != wantM {
		t.Errorf("%s: %s is a %s %s binary, want %s %s for %s", ref, want.binary, got.Machine, got.ByteOrder, wantM.Machine, wantM.ByteOrder, platform)
	}

	// The binary runs in the image (no libc, no shell, no CA bundle), and
	// reports the version it was built with.
	if platform != runtime.GOOS+"/"+runtime.GOARCH {
		return
	}
	out := s.run(t, ref, want.binary, "--version")
	if wantOut := fmt.Sprintf("%s, version %s (branch: ", want.title, testVersion); !strings.HasPrefix(out, wantOut) || !strings.Contains(out, "revision: "+testRevision+")") {
		t.Errorf("%s: %s --version printed %q, want %q... revision: %s)", ref, want.binary, out, wantOut, testRevision)
	}
}

// TestImage builds `make image` and `make image-controller` for this
// machine, as the e2e suite does.
func TestImage(t *testing.T) {
	s := newStore(t)
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		target, nameVar string
		want            image
	}{
		{"image", "IMAGE", sidecar},
		{"image-controller", "CONTROLLER_IMAGE", controller},
	} {
		t.Run(tc.target, func(t *testing.T) {
			name := "localhost/" + tc.want.title + "-test:" + tc.target
			s.make(t, tc.target, tc.nameVar+"="+name)
			s.check(t, name, tc.want, platform)
		})
	}
}

// TestImageAll builds `make image-all`: a manifest list with one image per
// platform of `make build-all`, each checked, and the one for this machine
// run.
func TestImageAll(t *testing.T) {
	s := newStore(t)
	name := "localhost/hotreload-test:all"
	s.make(t, "image-all", "IMAGE="+name)

	var list struct {
		Manifests []struct {
			Digest   string `json:"digest"`
			Platform struct {
				OS           string `json:"os"`
				Architecture string `json:"architecture"`
				Variant      string `json:"variant"`
			} `json:"platform"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal([]byte(s.buildah(t, "manifest", "inspect", name)), &list); err != nil {
		t.Fatalf("manifest inspect %s: %v", name, err)
	}
	want := []string{"linux/amd64", "linux/arm64", "linux/arm/v7", "linux/ppc64le", "linux/s390x"}
	var got []string
	for _, m := range list.Manifests {
		p := m.Platform
		platform := strings.TrimSuffix(p.OS+"/"+p.Architecture+"/"+p.Variant, "/")
		got = append(got, platform)
		t.Run(strings.ReplaceAll(platform, "/", "_"), func(t *testing.T) {
			s.check(t, name+"@"+m.Digest, sidecar, platform)
		})
	}
	if !slices.Equal(got, want) {
		t.Errorf("manifest list %s has platforms %q, want %q", name, got, want)
	}
	if !slices.Contains(got, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("no image in %s for this machine (%s/%s) to run", name, runtime.GOOS, runtime.GOARCH)
	}
}
