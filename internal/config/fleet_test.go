package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFleetFlags(t *testing.T) {
	url := "--webhook-url=http://127.0.0.1:9090/-/reload"
	view := "--view=ref=configmap/app,source=/hotreload/source/app,dir=/etc/app"
	t.Run("standalone view, no --volume-dir", func(t *testing.T) {
		c, targets, err := parseAll(t, url, view)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Fleet.Views) != 1 || c.Fleet.Views[0].Dir != "/etc/app" || len(targets) != 1 {
			t.Errorf("views %+v, targets %d", c.Fleet.Views, len(targets))
		}
		dirs, _ := c.watchDirs()
		if strings.Join(dirs, " ") != "/hotreload/source/app" {
			t.Errorf("watched %v, want the source", dirs)
		}
	})
	t.Run("two views from the environment, one a line", func(t *testing.T) {
		t.Setenv("HOTRELOAD_VIEW", "ref=configmap/a,source=/s/a,dir=/etc/a,stable=/st/a,expand=*.yaml\nref=secret/b,source=/s/b,dir=/etc/b")
		t.Setenv("HOTRELOAD_POD_ANNOTATIONS", "/hotreload/pod/annotations")
		c, _, err := parseAll(t, url)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Fleet.Views) != 2 || c.Fleet.Views[1].Ref.String() != "secret/b" || c.Fleet.PodAnnotations != "/hotreload/pod/annotations" {
			t.Fatalf("views %+v, annotations %q", c.Fleet.Views, c.Fleet.PodAnnotations)
		}
		dirs, flags := c.watchDirs()
		if got := strings.Join(dirs, " "); got != "/s/a /st/a /s/b /hotreload/pod" {
			t.Errorf("watched %s", got)
		}
		if got := flags["/hotreload/pod"]; got != "--pod-annotations /hotreload/pod/annotations: directory /hotreload/pod" {
			t.Errorf("flag of the annotations directory %q", got)
		}
	})
	t.Run("restart, env config by the annotation alone", func(t *testing.T) {
		c, targets, err := parseAll(t, "--restart-container", "--process-name=app", "--view=ref=configmap/env-config",
			"--view=ref=configmap/app,source=/s,dir=/etc/app,stable=/st", "--pod-annotations=/hotreload/pod/annotations")
		if err != nil {
			t.Fatal(err)
		}
		if len(targets) != 1 || targets[0].Name() != "restart:app" {
			t.Fatalf("targets %v", targets)
		}
		f := c.Fleet
		if f.RestartGrace != 30*time.Second || f.RestartTimeout != 5*time.Minute || f.RestartSettle != 2*time.Second {
			t.Errorf("restart defaults %v %v %v", f.RestartGrace, f.RestartTimeout, f.RestartSettle)
		}
	})
	t.Run("restart, standalone", func(t *testing.T) {
		if _, _, err := parseAll(t, "--restart-container", "--pid-file=/run/app.pid", "--volume-dir=/etc/config"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFleetBadCommandLines(t *testing.T) {
	dir := t.TempDir()
	url := "--webhook-url=http://127.0.0.1:9090/-/reload"
	view := "--view=ref=configmap/app,source=/s,dir=/etc/app"
	ann := "--pod-annotations=/hotreload/pod/annotations"
	restart := []string{"--restart-container", "--process-name=app"}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"view not key=value", []string{url, "--view=configmap/app"}, `--view "configmap/app": "configmap/app": want key=value`},
		{"view bad ref", []string{url, "--view=ref=cm/app,source=/s,dir=/d"}, `--view "ref=cm/app,source=/s,dir=/d": ref "cm/app": want configmap/NAME or secret/NAME`},
		{"view relative dir", []string{url, "--view=ref=configmap/a,source=/s,dir=etc"}, `--view "ref=configmap/a,source=/s,dir=etc": dir "etc": want an absolute path`},
		{"view unknown key", []string{url, "--view=ref=configmap/a,source=/s,dir=/d,mode=x"}, `unknown key "mode"`},
		{"view dir is a volume dir", []string{url, view, "--volume-dir=/etc/app/"}, "--view configmap/app: dir /etc/app and --volume-dir /etc/app/ overlap"},
		{"view dir in a volume dir", []string{url, view, "--volume-dir=/etc"}, "--view configmap/app: dir /etc/app and --volume-dir /etc overlap"},
		{"env ref without restart", []string{url, "--view=ref=configmap/env", ann}, "--view ref=configmap/env has no source and dir: it follows the pod's annotation alone"},
		{"env ref without annotations", append([]string{"--view=ref=configmap/env"}, restart...), "needs --restart-container and --pod-annotations"},
		{"annotations without view", []string{url, "--volume-dir=/etc/x", ann}, "--pod-annotations needs a --view"},
		{"annotations relative", []string{url, view, "--pod-annotations=pod/annotations"}, "--pod-annotations pod/annotations: want an absolute path"},
		{"annotations a directory", []string{url, view, "--pod-annotations=" + dir}, "--pod-annotations " + dir + ": is a directory; want the file of the downwardAPI volume item, such as " + filepath.Join(dir, "annotations")},
		{"annotations empty", []string{url, view, "--pod-annotations="}, `--pod-annotations "": must not be empty`},
		{"restart and signal", append([]string{view, "--signal=HUP"}, restart...), "--restart-container and --signal: give one"},
		{"restart and webhook", append([]string{view, url}, restart...), "--restart-container and --webhook-url: give one"},
		{"restart without process", []string{view, "--restart-container"}, "--restart-container needs --process-name, --process-cmdline or --pid-file"},
		{"restart and force", append([]string{view, "--signal-force"}, restart...), "--signal-force does not apply to --restart-container"},
		{"restart, annotations and a volume dir", append([]string{"--volume-dir=/etc/x", "--view=ref=configmap/a,source=/s,dir=/d,stable=/st", ann}, restart...),
			"--volume-dir /etc/x with --restart-container and --pod-annotations: every refresh by the kubelet would restart the app"},
		{"restart, annotations and a view without stable", append([]string{view, ann}, restart...),
			"--view ref=configmap/app: with --restart-container and --pod-annotations a view needs stable="},
		{"restart grace", append([]string{view, "--restart-grace=10ms"}, restart...), "--restart-grace 10ms: must be from 1s to 1h"},
		{"restart timeout", append([]string{view, "--restart-timeout=1s"}, restart...), "--restart-timeout 1s: must be from 10s to 1h"},
		{"restart settle", append([]string{view, "--restart-settle=0"}, restart...), "--restart-settle 0: must be from 100ms to 10m"},
		{"restart=maybe", append([]string{view, "--restart-container=maybe"}, restart[1:]...), "--restart-container=maybe: --restart-container takes no value, or true or false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseAll(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("%q: error %v, want one with %q", tt.args, err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestNewWatcherNamesTheViewFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := parse(t, "--webhook-url=http://127.0.0.1:9090/-/reload", "--view=ref=configmap/app,source="+file+",dir=/etc/app")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewWatcher(nil, nil, c)
	if want := "--view ref=configmap/app: source " + file + ": is a file, not a directory"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("NewWatcher = %v, want %q", err, want)
	}
}

// TestNewViewsNamesTheFlag: what the view package refuses of the views
// together comes in one line naming --view, and nothing is written.
func TestNewViewsNamesTheFlag(t *testing.T) {
	app := filepath.Join(t.TempDir(), "app")
	c, err := parse(t, "--webhook-url=http://127.0.0.1:9090/-/reload", "--view=ref=configmap/a,source=/s,dir="+app,
		"--view=ref=configmap/b,source=/t,dir="+app+"/sub")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewViews(nil, nil, c, nil)
	if want := "--view: views configmap/a and configmap/b: dir " + app + "/sub overlaps a directory of configmap/a"; err == nil || err.Error() != want {
		t.Errorf("NewViews = %v, want %q", err, want)
	}
	if _, err := os.Stat(app); !os.IsNotExist(err) {
		t.Errorf("the app's directory was made: %v", err)
	}
}
