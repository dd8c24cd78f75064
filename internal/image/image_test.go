// Package image_test builds the container image with `make image` from
// scratch (base images cannot be pulled everywhere) and checks what a
// cluster will run: the user, the entrypoint, the labels, and that the
// binary runs inside it.
package image_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func need(t *testing.T, tool, why string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found; CI installs it (%s)", tool, why)
		}
		t.Skipf("%s not found: %s (apt-get install %s)", tool, why, tool)
	}
}

func buildah(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("buildah", append([]string{"--storage-driver", "vfs"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestImage(t *testing.T) {
	need(t, "buildah", "builds the image without a Docker engine")
	if testing.Short() {
		t.Skip("builds an image; skipped with -short")
	}
	name := fmt.Sprintf("localhost/hotreload-test:%d", os.Getpid())
	cmd := exec.Command("make", "-C", "../..", "image", "BASE=scratch", "IMAGE="+name, "VERSION=v0.0.0-test", "REVISION=abc1234")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("buildah", "--storage-driver", "vfs", "rmi", "-f", name).Run() })

	var img struct {
		OCIv1 struct {
			Architecture string `json:"architecture"`
			OS           string `json:"os"`
			Config       struct {
				User       string            `json:"User"`
				Entrypoint []string          `json:"Entrypoint"`
				Cmd        []string          `json:"Cmd"`
				Labels     map[string]string `json:"Labels"`
			} `json:"config"`
		} `json:"OCIv1"`
	}
	if err := json.Unmarshal([]byte(buildah(t, "inspect", "--type", "image", name)), &img); err != nil {
		t.Fatal(err)
	}
	c := img.OCIv1.Config
	if c.User != "65532:65532" {
		t.Errorf("user = %q, want 65532:65532 (non-root, as distroless nonroot)", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/hotreload"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint = %q cmd = %q, want exec form [\"/hotreload\"] and no cmd, so pod args are the flags", c.Entrypoint, c.Cmd)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "hotreload",
		"org.opencontainers.image.version":  "v0.0.0-test",
		"org.opencontainers.image.revision": "abc1234",
		"org.opencontainers.image.source":   "https://github.com/hotreload/hotreload",
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if img.OCIv1.OS != "linux" {
		t.Errorf("os = %q", img.OCIv1.OS)
	}

	// The binary runs in the image (no libc, no shell, no CA bundle), and
	// reports the version it was built with.
	ctr := strings.TrimSpace(buildah(t, "from", name))
	t.Cleanup(func() { _ = exec.Command("buildah", "--storage-driver", "vfs", "rm", ctr).Run() })
	if out := buildah(t, "run", "--isolation", "chroot", ctr, "/hotreload", "--version"); !strings.Contains(out, "hotreload v0.0.0-test (revision abc1234") {
		t.Errorf("--version in the image printed %q", out)
	}
	for _, line := range strings.Split(buildah(t, "images", "--format", "{{.Name}}:{{.Tag}} {{.Size}}", name), "\n") {
		if line != "" {
			t.Logf("image %s", line)
		}
	}
}
