// Package release_test checks what a release tag runs, which cannot run
// here: .github/workflows/release.yml is valid YAML, runs on a release tag
// with the permissions publishing needs, pins its actions, and builds only
// through make targets that exist (make -n each); and make release-check
// holds a tag to the chart's versions. make release itself runs in CI
// (.ci/run).
package release_test

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	yaml3 "go.yaml.in/yaml/v3"
)

const root = "../.."

type workflow struct {
	Name string `yaml:"name"`
	On   struct {
		Push struct {
			Tags     []string `yaml:"tags"`
			Branches []string `yaml:"branches"`
		} `yaml:"push"`
	} `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]struct {
		RunsOn      string            `yaml:"runs-on"`
		Permissions map[string]string `yaml:"permissions"`
		Steps       []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			Run  string            `yaml:"run"`
			With map[string]any    `yaml:"with"`
			Env  map[string]string `yaml:"env"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

func readWorkflow(t *testing.T) workflow {
	t.Helper()
	b, err := os.ReadFile(root + "/.github/workflows/release.yml")
	if err != nil {
		t.Fatal(err)
	}
	var w workflow
	dec := yaml3.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		t.Fatalf("release.yml: %v", err)
	}
	return w
}

var (
	pinned = regexp.MustCompile(`^[a-z0-9-]+/[a-z0-9-]+@[0-9a-f]{40}$`)
	// make and what follows it on a line of a run script, up to a shell
	// operator.
	makeCall = regexp.MustCompile(`\bmake((?:\s+[^\s;&|]+)+)`)
	// Building outside make: the build steps must be make targets.
	buildCmd = regexp.MustCompile(`\b(go (build|install)|buildah (bud|build|manifest|push)|docker (build|buildx)|skopeo copy|helm (package|push)|sha256sum|cyclonedx-gomod)\b`)
)

func TestWorkflow(t *testing.T) {
	w := readWorkflow(t)
	matches := false
	for _, p := range w.On.Push.Tags {
		if ok, err := path.Match(p, "v1.2.3"); err == nil && ok {
			matches = true
		}
		if ok, _ := path.Match(p, "main"); ok {
			t.Errorf("tag pattern %q matches a branch-like name", p)
		}
	}
	if !matches || len(w.On.Push.Branches) != 0 {
		t.Errorf("on.push: tags %q, branches %q; want a release tag vX.Y.Z only", w.On.Push.Tags, w.On.Push.Branches)
	}
	if len(w.Permissions) != 1 || w.Permissions["contents"] != "read" {
		t.Errorf("top-level permissions %v, want contents: read only", w.Permissions)
	}
	if len(w.Jobs) != 1 {
		t.Fatalf("%d jobs, want 1", len(w.Jobs))
	}
	var targets []string
	for name, job := range w.Jobs {
		if job.Permissions["packages"] != "write" || job.Permissions["contents"] != "write" {
			t.Errorf("job %s: permissions %v, want packages and contents write", name, job.Permissions)
		}
		for i, s := range job.Steps {
			switch {
			case s.Uses != "":
				if !pinned.MatchString(s.Uses) {
					t.Errorf("step %d uses %s: pin it to a commit", i+1, s.Uses)
				}
			case s.Run != "":
				if m := buildCmd.FindString(s.Run); m != "" {
					t.Errorf("step %q runs %q: build steps must be make targets", s.Name, m)
				}
				for _, m := range makeCall.FindAllStringSubmatch(s.Run, -1) {
					for _, arg := range strings.Fields(m[1]) {
						if !strings.Contains(arg, "=") && !strings.HasPrefix(arg, "-") {
							targets = append(targets, arg)
						}
					}
				}
			default:
				t.Errorf("step %d neither uses nor runs anything", i+1)
			}
		}
	}
	for _, want := range []string{"release-check", "release", "release-publish"} {
		if !slices.Contains(targets, want) {
			t.Errorf("the workflow never runs make %s", want)
		}
	}
	// Every target it names exists: make -n fails on one that does not.
	for _, tg := range targets {
		cmd := exec.Command("make", "-n", "-C", root, tg, "VERSION=v0.0.0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("make -n %s: %v\n%s", tg, err, out)
		}
	}
}

// A tag must be the chart's appVersion and v + its version.
func TestReleaseCheck(t *testing.T) {
	b, err := os.ReadFile(root + "/charts/hotreload/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ch struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	if err := yaml3.Unmarshal(b, &ch); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		version string
		ok      bool
		want    string
	}{
		{ch.AppVersion, true, ""},
		{"v" + ch.Version + "1", false, "the tag v" + ch.Version + "1 needs " + ch.Version + "1"},
		{"v99.0.0", false, "needs 99.0.0 and v99.0.0"},
		{"1a2b3c4-dirty", false, "not a release tag vX.Y.Z"},
	} {
		out, err := exec.Command("make", "-s", "-C", root, "release-check", "VERSION="+tc.version).CombinedOutput()
		if (err == nil) != tc.ok || !strings.Contains(string(out), tc.want) {
			t.Errorf("make release-check VERSION=%s: %v, %q; want ok=%v and %q", tc.version, err, out, tc.ok, tc.want)
		}
	}
}
