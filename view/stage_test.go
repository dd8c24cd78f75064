package view

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/notifier"
	"github.com/hotreload/hotreload/test/support/binary"
	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/watcher"
)

// harness runs a Stage with the test playing the kubelet (volumes written
// by test/support/kubelet), the watcher (a Change sent for each write) and the
// reloader (reading Changes, calling Delivered and Refused).
type harness struct {
	t      *testing.T
	root   string
	source *kubelet.Volume
	stable *kubelet.Volume
	pod    *kubelet.Volume // the downwardAPI volume of the pod's annotations
	plain  string          // a --volume-dir
	dir    string          // the app's directory
	in     chan watcher.Change
	s      *Stage
	reg    *prometheus.Registry
	logs   *binary.Buffer
	env    map[string]string
	stop   func() // stops Run and waits for it
}

func newHarness(t *testing.T) *harness {
	root := t.TempDir()
	return &harness{
		t:      t,
		root:   root,
		source: kubelet.New(filepath.Join(root, "source")),
		stable: kubelet.New(filepath.Join(root, "stable")),
		pod:    kubelet.New(filepath.Join(root, "pod")),
		plain:  filepath.Join(root, "plain"),
		dir:    filepath.Join(root, "app"),
		in:     make(chan watcher.Change, 16),
		reg:    prometheus.NewRegistry(),
		logs:   &binary.Buffer{},
		env:    map[string]string{},
	}
}

// start runs the Stage over views; it returns once Initial has answered,
// with what it answered.
func (h *harness) start(views []Config, annotations bool) map[string][32]byte {
	h.t.Helper()
	opts := Options{Views: views, VolumeDirs: []string{h.plain},
		Lookup: func(k string) (string, bool) { v, ok := h.env[k]; return v, ok }}
	if annotations {
		opts.Annotations = filepath.Join(h.pod.Dir, "annotations")
	}
	s, err := New(log.NewLogfmtLogger(h.logs), h.reg, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	h.s = s
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = s.Run(ctx, h.in, func(context.Context) (map[string][32]byte, error) {
			return map[string][32]byte{h.plain: {1}, h.source.Dir: {2}}, nil
		})
	})
	h.stop = func() { cancel(); wg.Wait() }
	h.t.Cleanup(h.stop)
	initial, err := s.Initial(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return initial
}

// standalone is a view of the source into the app's directory.
func (h *harness) standalone() Config {
	return Config{Ref: Ref{"configmap", "app"}, Source: h.source.Dir, Dir: h.dir}
}

func (h *harness) rollout() Config {
	c := h.standalone()
	c.Stable = h.stable.Dir
	return c
}

// write plays the kubelet and the watcher: v gets payload, and a Change
// of v is sent.
func (h *harness) write(v *kubelet.Volume, pathsAndData ...string) {
	h.t.Helper()
	p := map[string]kubelet.File{}
	for i := 0; i < len(pathsAndData); i += 2 {
		p[pathsAndData[i]] = kubelet.File{Data: []byte(pathsAndData[i+1])}
	}
	if _, err := v.Write(p); err != nil {
		h.t.Fatal(err)
	}
	h.in <- watcher.Change{Dir: v.Dir, Hash: [32]byte{byte(len(h.in))}, Time: time.Now()}
}

// annotate writes the pod's annotations file, as the kubelet does.
func (h *harness) annotate(annotations map[string]string) {
	h.t.Helper()
	var lines []string
	for _, k := range sortedKeys(annotations) {
		lines = append(lines, fmt.Sprintf("%s=%q", k, annotations[k]))
	}
	h.write(h.pod, "annotations", strings.Join(lines, "\n"))
}

func revs(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	b := "{"
	for i, k := range sortedKeys(m) {
		if i > 0 {
			b += ","
		}
		b += fmt.Sprintf("%q:%q", k, m[k])
	}
	return map[string]string{RevisionsAnnotation: b + "}", "kubernetes.io/config.seen": "x"}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// next returns the next Change the Stage sends.
func (h *harness) next() watcher.Change {
	h.t.Helper()
	select {
	case c := <-h.s.Changes():
		return c
	case <-time.After(10 * time.Second):
		h.t.Fatal("no Change within 10s")
	}
	return watcher.Change{}
}

// none checks that the Stage sends nothing more for what it was given so
// far: a change of the plain directory goes through it after everything
// before it, and must be the next Change.
func (h *harness) none() {
	h.t.Helper()
	h.in <- watcher.Change{Dir: h.plain, Hash: [32]byte{9}}
	if c := h.next(); c.Dir != h.plain {
		h.t.Fatalf("unexpected Change of %s", c.Dir)
	}
}

// app returns what the app reads from its directory.
func (h *harness) app() map[string]string {
	h.t.Helper()
	v, err := revision.ReadVolume(h.dir)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range v.Files {
		out[f.Path] = string(f.Data)
	}
	return out
}

func (h *harness) wantApp(pathsAndData ...string) {
	h.t.Helper()
	want := map[string]string{}
	for i := 0; i < len(pathsAndData); i += 2 {
		want[pathsAndData[i]] = pathsAndData[i+1]
	}
	if got := h.app(); !maps.Equal(got, want) {
		h.t.Fatalf("the app reads %v, want %v", got, want)
	}
}

func (h *harness) status() Status {
	h.t.Helper()
	vs := h.s.Views()
	if len(vs) != 1 {
		h.t.Fatalf("views %+v", vs)
	}
	return vs[0]
}

func (h *harness) wantStatus(want, running, result string) Status {
	h.t.Helper()
	st := h.status()
	if st.Want != want || st.Running != running || st.Result != result {
		h.t.Fatalf("view %+v, want want=%q running=%q result=%s", st, want, running, result)
	}
	if got := testutil.ToFloat64(h.s.m.info.WithLabelValues(st.Ref, running, result)); got != 1 {
		h.t.Fatalf("hotreload_view_revision_info{revision=%q,result=%q} = %v, want 1", running, result, got)
	}
	if n := testutil.CollectAndCount(h.s.m.info); n != 1 {
		h.t.Fatalf("%d series of hotreload_view_revision_info, want 1", n)
	}
	return st
}

func hashOf(pathsAndData ...string) [32]byte {
	var fs []revision.File
	for i := 0; i < len(pathsAndData); i += 2 {
		fs = append(fs, revision.File{Path: pathsAndData[i], Data: []byte(pathsAndData[i+1])})
	}
	return contentKey(revision.Sum(fs))
}

func nameOf(pathsAndData ...string) string { return shortHex(hashOf(pathsAndData...)) }

var refused = notifier.Refused(errors.New("POST http://app/-/reload: status 500, want 200: line 1: secret=hunter2 is bad"), "POST http://app/-/reload: status 500")

func TestStandalone(t *testing.T) {
	h := newHarness(t)
	h.write(h.source, "app.yaml", "v1")
	<-h.in // the Stage reads the volume at start
	initial := h.start([]Config{h.standalone()}, false)

	// The app's directory was empty: the first version is written before
	// Initial answers, and is what the app has at start.
	h.wantApp("app.yaml", "v1")
	if want := map[string][32]byte{h.plain: {1}, h.dir: hashOf("app.yaml", "v1")}; !maps.Equal(initial, want) {
		t.Fatalf("Initial = %v, want %v (the source is the view's, not the reloader's)", initial, want)
	}
	h.wantStatus("", nameOf("app.yaml", "v1"), Pending)
	h.s.Delivered(h.dir, hashOf("app.yaml", "v1")) // the reloader's start
	h.wantStatus("", nameOf("app.yaml", "v1"), Applied)
	h.none()

	// An edit: written, delivered, applied; the previous version goes.
	h.write(h.source, "app.yaml", "v2", "new.yaml", "n")
	if c := h.next(); c.Dir != h.dir || c.Hash != hashOf("app.yaml", "v2", "new.yaml", "n") {
		t.Fatalf("Change %s %x", c.Dir, c.Hash)
	}
	h.wantApp("app.yaml", "v2", "new.yaml", "n")
	h.wantStatus("", nameOf("app.yaml", "v2", "new.yaml", "n"), Pending)
	if _, ok := h.s.views[0].dir.LastGood(); !ok {
		t.Fatal("no last-known-good version kept while the new one is delivered")
	}
	h.s.Delivered(h.dir, hashOf("app.yaml", "v2", "new.yaml", "n"))
	h.wantStatus("", nameOf("app.yaml", "v2", "new.yaml", "n"), Applied)
	h.none() // Run has handled the wake-up: the commit is done
	if _, ok := h.s.views[0].dir.LastGood(); ok {
		t.Error("the last-known-good version is kept after the app took the new one")
	}

	// A refused edit: v2 goes back, and v3 is not written again until the
	// content changes.
	h.write(h.source, "app.yaml", "v3")
	c := h.next()
	h.wantApp("app.yaml", "v3")
	if h.s.Refused(errors.New("connection refused"), map[string][32]byte{h.dir: c.Hash}) {
		t.Fatal("a transport error counted as a refusal")
	}
	if h.s.Refused(refused, map[string][32]byte{h.dir: hashOf("app.yaml", "old")}) {
		t.Fatal("a refusal of content that no longer runs rolled back")
	}
	if !h.s.Refused(refused, map[string][32]byte{h.dir: c.Hash}) {
		t.Fatal("a refusal was not handled")
	}
	h.wantApp("app.yaml", "v2", "new.yaml", "n")
	if c := h.next(); c.Dir != h.dir || c.Hash != hashOf("app.yaml", "v2", "new.yaml", "n") {
		t.Fatalf("after the rollback, Change %s %x, want the version put back", c.Dir, c.Hash)
	}
	st := h.wantStatus("", nameOf("app.yaml", "v2", "new.yaml", "n"), Rejected)
	if st.Error != "POST http://app/-/reload: status 500" || st.Refused != nameOf("app.yaml", "v3") {
		t.Errorf("status %+v: want the short reason, without the app's answer, and the refused revision", st)
	}
	if got := testutil.ToFloat64(h.s.m.rollbacks.WithLabelValues("configmap/app")); got != 1 {
		t.Errorf("hotreload_view_rollbacks_total = %v, want 1", got)
	}
	h.s.Delivered(h.dir, hashOf("app.yaml", "v2", "new.yaml", "n"))
	h.wantStatus("", nameOf("app.yaml", "v2", "new.yaml", "n"), Rejected) // still: v3 is what the source says

	h.in <- watcher.Change{Dir: h.source.Dir} // the source, unchanged, seen again (a resync)
	h.none()
	h.wantApp("app.yaml", "v2", "new.yaml", "n")

	h.write(h.source, "app.yaml", "v4")
	if c := h.next(); c.Hash != hashOf("app.yaml", "v4") {
		t.Fatalf("Change %x, want v4's", c.Hash)
	}
	h.wantStatus("", nameOf("app.yaml", "v4"), Pending)
	if strings.Contains(h.logs.String(), "hunter2") {
		t.Error("the app's answer reached the logs of the view")
	}
}

func TestRollout(t *testing.T) {
	h := newHarness(t)
	stable := []string{"app.yaml", "stable"}
	cand := []string{"app.yaml", "candidate"}
	sum := func(pathsAndData ...string) [32]byte {
		var fs []revision.File
		for i := 0; i < len(pathsAndData); i += 2 {
			fs = append(fs, revision.File{Path: pathsAndData[i], Data: []byte(pathsAndData[i+1])})
		}
		return revision.Sum(fs)
	}
	rollout := func(candidate bool) string {
		r := revision.Rollout{Source: "configmap/app", Stable: revision.NewPin("100", sum(stable...))}
		if candidate {
			p := revision.NewPin("200", sum(cand...))
			r.Candidate = &p
		}
		return string(r.Marshal())
	}
	// The user's edit is in the source; the stable copy has no candidate
	// yet, and the pod no annotation.
	h.write(h.source, cand...)
	h.write(h.stable, append(stable, revision.ReservedKey, rollout(false))...)
	h.annotate(map[string]string{"other": "x"})
	for range 3 {
		<-h.in
	}
	h.start([]Config{h.rollout()}, true)
	h.wantApp(stable...)
	h.wantStatus("", "100", Pending)
	h.s.Delivered(h.dir, hashOf(stable...))

	// The controller writes the candidate, then annotates the pod.
	h.write(h.stable, append(stable, revision.ReservedKey, rollout(true))...)
	h.annotate(map[string]string{"other": "y"}) // unrelated: nothing happens
	h.none()
	h.wantStatus("", "100", Applied)

	h.annotate(revs("configmap/app", "200", "secret/other", "7"))
	if c := h.next(); c.Hash != hashOf(cand...) {
		t.Fatalf("Change %x, want the candidate's", c.Hash)
	}
	h.wantApp(cand...)
	h.wantStatus("200", "200", Pending)
	h.s.Delivered(h.dir, hashOf(cand...))
	h.wantStatus("200", "200", Applied)

	// The revision of another ref changes: nothing happens.
	h.annotate(revs("configmap/app", "200", "secret/other", "8"))
	h.none()

	// The user edits again during the rollout: the source moves on, the
	// pod keeps the candidate it runs and waits.
	h.write(h.source, "app.yaml", "newer")
	h.none()
	h.wantApp(cand...)
	st := h.wantStatus("200", "200", Waiting)
	if st.Reason != "the source volume does not hold candidate revision 200 yet" {
		t.Errorf("reason %q", st.Reason)
	}

	// Abort: the pod is annotated back to stable.
	h.annotate(revs("configmap/app", "100"))
	if c := h.next(); c.Hash != hashOf(stable...) {
		t.Fatalf("Change %x, want stable's", c.Hash)
	}
	h.wantApp(stable...)
	h.wantStatus("100", "100", Pending)

	// A name that is neither: wait, keep stable.
	h.annotate(revs("configmap/app", "150"))
	h.none()
	h.wantStatus("150", "100", Waiting)

	// The stable copy is deleted (the ConfigRollout is gone): the source
	// runs.
	h.write(h.stable)
	if c := h.next(); c.Hash != hashOf("app.yaml", "newer") {
		t.Fatalf("Change %x, want the source's", c.Hash)
	}
	h.wantStatus("150", nameOf("app.yaml", "newer"), Pending)

	// A malformed annotations file is no annotation, with one warning.
	h.write(h.stable, append(stable, revision.ReservedKey, rollout(true))...)
	h.none() // 150 is neither: what runs is kept
	h.write(h.pod, "annotations", "garbage")
	h.write(h.pod, "annotations", "garbage\n")
	if c := h.next(); c.Hash != hashOf(stable...) {
		t.Fatalf("Change %x, want stable's", c.Hash)
	}
	h.none()
	h.wantStatus("", "100", Pending)
	if n := strings.Count(h.logs.String(), "the pod's annotations do not parse"); n != 1 {
		t.Errorf("%d warnings for the malformed annotations file, want 1 (rate-limited)\n%s", n, h.logs)
	}
}

func TestStageExpand(t *testing.T) {
	h := newHarness(t)
	h.env["DB"] = "db.local"
	h.write(h.source, "app.yaml", "db: $(DB)", "raw.txt", "$(DB)")
	<-h.in
	c := h.standalone()
	c.Expand = []string{"*.yaml"}
	h.start([]Config{c}, false)
	h.wantApp("app.yaml", "db: db.local", "raw.txt", "$(DB)")
	h.s.Delivered(h.dir, hashOf("app.yaml", "db: db.local", "raw.txt", "$(DB)"))

	h.write(h.source, "app.yaml", "db: $(DB) user: $(USER_NOT_SET)", "raw.txt", "$(DB)")
	h.none()
	h.wantApp("app.yaml", "db: db.local", "raw.txt", "$(DB)") // nothing written
	st := h.wantStatus("", nameOf("app.yaml", "db: $(DB)", "raw.txt", "$(DB)"), Rejected)
	if st.Error != "expand app.yaml: $(USER_NOT_SET) is not set in hotreload's environment" {
		t.Errorf("error %q", st.Error)
	}
}

func TestEnvRef(t *testing.T) {
	h := newHarness(t)
	h.annotate(revs("configmap/env", "5"))
	<-h.in
	ref := Config{Ref: Ref{"configmap", "env"}}
	initial := h.start([]Config{ref}, true)
	if want := envKey(ref.Ref, "5"); initial["configmap/env"] != want {
		t.Fatalf("Initial = %v, want the revision the container started with", initial)
	}
	h.s.Delivered("configmap/env", envKey(ref.Ref, "5"))
	h.wantStatus("5", "5", Applied)

	h.annotate(revs("configmap/env", "5", "configmap/other", "1")) // another ref
	h.annotate(map[string]string{})                                // no annotation: keep
	h.annotate(revs("configmap/env", "5"))
	h.none()

	h.annotate(revs("configmap/env", "6"))
	if c := h.next(); c.Dir != "configmap/env" || c.Hash != envKey(ref.Ref, "6") {
		t.Fatalf("Change %s %x", c.Dir, c.Hash)
	}
	h.wantStatus("6", "6", Pending)
	if !h.s.Refused(refused, map[string][32]byte{"configmap/env": envKey(ref.Ref, "6")}) {
		t.Fatal("refusal not handled")
	}
	if c := h.next(); c.Hash != envKey(ref.Ref, "5") {
		t.Fatalf("after the refusal, Change %x, want revision 5's", c.Hash)
	}
	h.wantStatus("6", "5", Rejected)
	if got := testutil.ToFloat64(h.s.m.rollbacks.WithLabelValues("configmap/env")); got != 0 {
		t.Errorf("rollbacks %v: nothing was put back on disk", got)
	}
	h.annotate(revs("configmap/env", "6", "x/y", "z")) // does not parse: no annotation, keep
	h.annotate(revs("configmap/env", "6"))
	h.none()
	h.annotate(revs("configmap/env", "7"))
	if c := h.next(); c.Hash != envKey(ref.Ref, "7") {
		t.Fatalf("Change %x, want revision 7's", c.Hash)
	}
}

// TestRestartOfHotreload: a hotreload that starts over a directory
// written before keeps it as what the app has, and delivers what changed
// meanwhile.
func TestRestartOfHotreload(t *testing.T) {
	h := newHarness(t)
	h.write(h.source, "app.yaml", "v1")
	<-h.in
	h.start([]Config{h.standalone()}, false)
	h.wantApp("app.yaml", "v1")
	h.stop()

	h2 := newHarness(t)
	h2.root, h2.source, h2.dir = h.root, h.source, h.dir
	if _, err := h.source.Write(map[string]kubelet.File{"app.yaml": {Data: []byte("v2")}}); err != nil {
		t.Fatal(err)
	}
	initial := h2.start([]Config{h2.standalone()}, false)
	if initial[h.dir] != hashOf("app.yaml", "v1") {
		t.Fatalf("Initial %x, want v1's: what the app read before", initial[h.dir])
	}
	if c := h2.next(); c.Hash != hashOf("app.yaml", "v2") {
		t.Fatalf("Change %x, want v2's", c.Hash)
	}
	h2.wantStatus("", nameOf("app.yaml", "v2"), Pending)

	// Stopped before the app took v2: the next start knows, from the
	// last-known-good version kept, that the app was last given v1, and
	// delivers v2 again.
	h2.stop()
	h3 := newHarness(t)
	h3.root, h3.source, h3.dir = h.root, h.source, h.dir
	initial = h3.start([]Config{h3.standalone()}, false)
	if initial[h.dir] != hashOf("app.yaml", "v1") {
		t.Fatalf("Initial %x, want v1's: v2 was never confirmed", initial[h.dir])
	}
	if c := h3.next(); c.Hash != hashOf("app.yaml", "v2") {
		t.Fatalf("Change %x, want v2's", c.Hash)
	}
	if !h3.s.Refused(refused, map[string][32]byte{h.dir: hashOf("app.yaml", "v2")}) {
		t.Fatal("refusal not handled")
	}
	h3.wantApp("app.yaml", "v1")
}

func TestNewRefuses(t *testing.T) {
	root := t.TempDir()
	app := filepath.Join(root, "app")
	cases := map[string]Options{
		"view configmap/a given twice": {Views: []Config{{Ref: Ref{"configmap", "a"}, Source: "/s", Dir: app}, {Ref: Ref{"configmap", "a"}, Source: "/t", Dir: app + "2"}}},
		"views configmap/a and configmap/b: dir " + app + " overlaps a directory of configmap/a": {Views: []Config{
			{Ref: Ref{"configmap", "a"}, Source: "/s", Dir: app}, {Ref: Ref{"configmap", "b"}, Source: "/t", Dir: app}}},
		"view configmap/e has no volume: it follows the pod's annotation alone, which needs the annotations file": {Views: []Config{{Ref: Ref{"configmap", "e"}}}},
		"view configmap/a: dir " + app + " and the annotations file " + app + "/x/annotations overlap": {
			Views: []Config{{Ref: Ref{"configmap", "a"}, Source: "/s", Dir: app}}, Annotations: app + "/x/annotations"},
	}
	for want, opts := range cases {
		if _, err := New(nil, prometheus.NewRegistry(), opts); err == nil || err.Error() != want {
			t.Errorf("New = %v, want %q", err, want)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := New(nil, prometheus.NewRegistry(), Options{Views: []Config{{Ref: Ref{"configmap", "a"}, Source: "/s", Dir: root}}})
	if err == nil || !strings.Contains(err.Error(), "holds file, which hotreload did not write") {
		t.Errorf("New over a directory with a file = %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	good := map[string]Config{
		"ref=configmap/app,source=/src,dir=/etc/app":                                  {Ref: Ref{"configmap", "app"}, Source: "/src", Dir: "/etc/app"},
		"dir=/etc/app/,ref=secret/db,source=/src,stable=/st,expand=*.yaml,expand=a/*": {Ref: Ref{"secret", "db"}, Source: "/src", Dir: "/etc/app", Stable: "/st", Expand: []string{"*.yaml", "a/*"}},
		"ref=configmap/env-config":                                                    {Ref: Ref{"configmap", "env-config"}},
	}
	for in, want := range good {
		got, err := ParseConfig(in)
		if err != nil || got.Ref != want.Ref || got.Source != want.Source || got.Dir != want.Dir || got.Stable != want.Stable || strings.Join(got.Expand, " ") != strings.Join(want.Expand, " ") {
			t.Errorf("ParseConfig(%q) = %+v, %v, want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":                                            `"": want key=value`,
		"ref=configmap/a,dir":                         `"dir": want key=value`,
		"ref=configmap/a,ref=x":                       "ref given twice",
		"source=/s,dir=/d":                            "ref is required",
		"ref=configmap/a,dir=/d":                      "dir needs source",
		"ref=configmap/a,source=/":                    "source needs dir",
		"ref=configmap/a,stable=/":                    "stable and expand need source and dir",
		"ref=configmap/a,source=s,dir=/d":             "source \"s\": want an absolute path",
		"ref=configmap/a,source=/s,dir=/s/x":          "dir /s/x and source /s overlap",
		"ref=configmap/a,source=/s,dir=/d,stable=/":   "dir /d and stable / overlap",
		"ref=configmap/a,source=/s,dir=/d,stable=/s":  "stable and source are both /s",
		"ref=configmap/a,source=/s,dir=/d,expand=[":   "expand \"[\": syntax error in pattern",
		"ref=configmap/a,source=/s,dir=/d,color=blue": `unknown key "color"`,
		"ref=deployment/a,source=/s,dir=/d":           "want configmap/NAME or secret/NAME",
	}
	for in, want := range bad {
		if _, err := ParseConfig(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseConfig(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestRevisionNames: a view with no rollout names its content by a hash
// of it for a ConfigMap, by an HMAC with the key when there is one, and
// not at all for a Secret without a key; a Secret view is sensitive to the
// reloader, a ref with no volume never.
func TestRevisionNames(t *testing.T) {
	for _, tt := range []struct {
		kind string
		key  []byte
		want func(string) bool
	}{
		{"configmap", nil, func(r string) bool { return r == nameOf("a", "1") }},
		{"secret", nil, func(r string) bool { return r == "" }},
		{"secret", bytes.Repeat([]byte{7}, 32), func(r string) bool { return len(r) == 12 && r != nameOf("a", "1") }},
	} {
		t.Run(fmt.Sprintf("%s key=%v", tt.kind, tt.key != nil), func(t *testing.T) {
			s := &Stage{key: tt.key}
			if got := s.contentName(Ref{tt.kind, "x"}, hashSum("a", "1")); !tt.want(got) {
				t.Errorf("revision %q", got)
			}
		})
	}
	s, err := New(nil, prometheus.NewRegistry(), Options{Annotations: filepath.Join(t.TempDir(), "pod", "annotations"), Views: []Config{
		{Ref: Ref{"secret", "s"}, Source: "/s", Dir: filepath.Join(t.TempDir(), "s")},
		{Ref: Ref{"configmap", "c"}, Source: "/c", Dir: filepath.Join(t.TempDir(), "c")},
		{Ref: Ref{"secret", "env"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][2]bool{s.views[0].key: {true, true}, s.views[1].key: {false, true}, "secret/env": {false, true}, "/etc/other": {false, false}} {
		if sens, ok := s.Sensitive(key); sens != want[0] || ok != want[1] {
			t.Errorf("Sensitive(%s) = %v, %v, want %v", key, sens, ok, want)
		}
	}
}

func hashSum(pathsAndData ...string) [32]byte {
	var fs []revision.File
	for i := 0; i < len(pathsAndData); i += 2 {
		fs = append(fs, revision.File{Path: pathsAndData[i], Data: []byte(pathsAndData[i+1])})
	}
	return revision.Sum(fs)
}

// TestUnconfirmedIsARefusal: a signalled master that kept its workers
// refused the config: the view rolls back, and reports what the master did.
func TestUnconfirmedIsARefusal(t *testing.T) {
	h := newHarness(t)
	h.write(h.source, "nginx.conf", "v1")
	<-h.in
	h.start([]Config{h.standalone()}, false)
	h.s.Delivered(h.dir, hashOf("nginx.conf", "v1"))
	h.write(h.source, "nginx.conf", "v2")
	c := h.next()
	kept := fmt.Errorf("signal delivered but pid 12 (nginx) kept its workers: the new config was probably refused; see the app's log: %w", notifier.ErrUnconfirmed)
	if !h.s.Refused(kept, map[string][32]byte{h.dir: c.Hash}) {
		t.Fatal("an unconfirmed signal was not taken as a refusal")
	}
	h.wantApp("nginx.conf", "v1")
	if st := h.wantStatus("", nameOf("nginx.conf", "v1"), Rejected); st.Error != "signal delivered but pid 12 (nginx) kept its workers" {
		t.Errorf("error %q", st.Error)
	}
}

// TestPendingSaysWhy: an attempt that fails without a refusal (the app's
// process not found, a refused connection, a "come back later" status)
// leaves the view pending with the reason, one line that quotes nothing of
// the app's answer, and the hint; the reason goes when the content is
// delivered, or when another version is written; a failure of content
// that no longer runs says nothing.
func TestPendingSaysWhy(t *testing.T) {
	h := newHarness(t)
	h.write(h.source, "app.yaml", "v1")
	<-h.in
	h.start([]Config{h.standalone()}, false)
	h.s.hint = func(err error) string {
		if strings.Contains(err.Error(), "no process") {
			return "does the pod set shareProcessNamespace: true?"
		}
		return ""
	}
	h.s.Delivered(h.dir, hashOf("app.yaml", "v1"))
	h.wantStatus("", nameOf("app.yaml", "v1"), Applied)

	h.write(h.source, "app.yaml", "v2")
	c := h.next()
	if h.s.Refused(errors.New("no process named app"), map[string][32]byte{h.dir: c.Hash}) {
		t.Fatal("a missing process counted as a refusal")
	}
	st := h.wantStatus("", nameOf("app.yaml", "v2"), Pending)
	if st.Error != "no process named app (does the pod set shareProcessNamespace: true?)" {
		t.Errorf("error %q, want the reason and the hint", st.Error)
	}
	// A "come back later" answer: its reason, never the answer.
	later := notifier.WithReason(errors.New("POST http://app/-/reload: status 503, want 200: password=hunter2"), "POST http://app/-/reload: status 503")
	h.s.Refused(later, map[string][32]byte{h.dir: c.Hash})
	if st := h.status(); st.Error != "POST http://app/-/reload: status 503" {
		t.Errorf("error %q, want the request and the status alone", st.Error)
	}
	// A failure of content that no longer runs changes nothing.
	h.s.Refused(errors.New("connection refused"), map[string][32]byte{h.dir: hashOf("app.yaml", "v1")})
	if st := h.status(); st.Error != "POST http://app/-/reload: status 503" {
		t.Errorf("error %q after a failure of other content", st.Error)
	}
	// The kubelet rewrites the source unchanged: still pending, still why.
	h.in <- watcher.Change{Dir: h.source.Dir}
	h.none()
	if st := h.status(); st.Result != Pending || st.Error == "" {
		t.Errorf("view %+v after a resync, want the reason kept", st)
	}
	h.s.Delivered(h.dir, c.Hash)
	if st := h.wantStatus("", nameOf("app.yaml", "v2"), Applied); st.Error != "" {
		t.Errorf("applied with error %q", st.Error)
	}

	// A new version starts with no reason.
	h.write(h.source, "app.yaml", "v3")
	c = h.next()
	h.s.Refused(errors.New("POST http://app/-/reload: connection refused"), map[string][32]byte{h.dir: c.Hash})
	h.write(h.source, "app.yaml", "v4")
	h.next()
	if st := h.wantStatus("", nameOf("app.yaml", "v4"), Pending); st.Error != "" {
		t.Errorf("a new version reports the old one's failure: %q", st.Error)
	}
	if strings.Contains(h.logs.String(), "hunter2") {
		t.Error("the app's answer reached the logs")
	}
}
