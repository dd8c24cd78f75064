package docs

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	link       = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	inlineCode = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	// What GitHub drops from a heading's text to make its anchor.
	notInSlug = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)
	mdLink    = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// slug is the anchor GitHub gives a heading: its text without markup,
// lower case, with punctuation dropped and spaces made dashes.
func slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	h = strings.NewReplacer("`", "", "*", "", "<", "", ">", "").Replace(h)
	h = notInSlug.ReplaceAllString(strings.ToLower(h), "")
	return strings.ReplaceAll(h, " ", "-")
}

// lines returns a Markdown file's lines outside fenced code blocks.
func lines(b []byte) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}

// anchors returns the anchors of a file's headings, numbered as GitHub
// numbers repeated ones.
func anchors(b []byte) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range lines(b) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"How it compares":                       "how-it-compares",
		"The real-cluster suite: `make e2e`":    "the-real-cluster-suite-make-e2e",
		"The watcher of issue #28 (2026-11-25)": "the-watcher-of-issue-28-2026-11-25",
		"`make bench`: latency, CPU, start-up":  "make-bench-latency-cpu-start-up",
		"Use it with ...":                       "use-it-with-",
		"Bursts (`--coalesce`, default 300ms)":  "bursts---coalesce-default-300ms",
		"The sidecar: `hotreload`":              "the-sidecar-hotreload",
		"See [rollout.md](rollout.md) for more": "see-rolloutmd-for-more",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// Every relative link in the repository's Markdown names a file or
// directory that exists, and its anchor, if any, a heading of that file.
func TestLinks(t *testing.T) {
	root := ".."
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin" || d.Name() == "dist") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d Markdown files: %v", len(files), files)
	}
	checked := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines(b) {
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				if p, err := url.PathUnescape(path); err == nil {
					path = p
				}
				file := f
				if path != "" {
					file = filepath.Join(filepath.Dir(f), path)
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s: link %q: %s does not exist", f, target, file)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s: link %q: an anchor into a file that is not Markdown", f, target)
					continue
				}
				tb, err := os.ReadFile(file)
				if err != nil {
					t.Errorf("%s: link %q: %v", f, target, err)
					continue
				}
				if !anchors(tb)[anchor] {
					t.Errorf("%s: link %q: %s has no heading with the anchor #%s", f, target, file, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked", checked)
	}
}
