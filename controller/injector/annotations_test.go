package injector

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseAnnotations(t *testing.T) {
	r, warnings, err := ParseAnnotations(map[string]string{
		AnnotationReloadURL:    "http://127.0.0.1:9090/-/reload, https://localhost:8443/reload?x=%2C",
		AnnotationRollout:      "true",
		AnnotationVolumes:      "config,creds",
		AnnotationContainer:    "web",
		AnnotationNudge:        "false",
		"hotreload.dev/nudged": "configmap/x@1",
		"other.io/thing":       "x",
	})
	if err != nil || len(warnings) != 0 {
		t.Fatalf("err %v, warnings %q", err, warnings)
	}
	if !slices.Equal(r.ReloadURLs, []string{"http://127.0.0.1:9090/-/reload", "https://localhost:8443/reload?x=%2C"}) ||
		!r.Rollout || r.Restart || r.Signal != "" || !slices.Equal(r.Volumes, []string{"config", "creds"}) || r.Container != "web" {
		t.Errorf("%+v", r)
	}

	r, _, err = ParseAnnotations(map[string]string{AnnotationSignal: " SIGHUP ", AnnotationProcessCmdline: "^nginx: master", AnnotationRunAsUser: "101"})
	if err != nil || r.Signal != "SIGHUP" || r.ProcessCmdline != "^nginx: master" || *r.RunAsUser != 101 || !r.Signals() || r.Views() {
		t.Errorf("%+v, %v", r, err)
	}
	r, _, err = ParseAnnotations(map[string]string{AnnotationRestart: "true", AnnotationProcessName: "app"})
	if err != nil || !r.Restart || !r.Signals() || !r.Views() {
		t.Errorf("%+v, %v", r, err)
	}
}

func TestOptedIn(t *testing.T) {
	for _, k := range []string{AnnotationReloadURL, AnnotationSignal, AnnotationRestart, AnnotationRollout} {
		if !OptedIn(map[string]string{k: ""}) {
			t.Errorf("%s does not opt in", k)
		}
	}
	for _, a := range []map[string]string{nil, {AnnotationNudge: "true"}, {AnnotationVolumes: "x"}, {"reload-url": "http://x/"}} {
		if OptedIn(a) {
			t.Errorf("%v opts in", a)
		}
	}
	if _, _, err := ParseAnnotations(map[string]string{AnnotationRestart: "false", AnnotationRollout: "false"}); !errors.Is(err, errNotOptedIn) {
		t.Errorf("all false: %v, want not opted in", err)
	}
}

// Every bad annotation is an error that names it and says what to give
// instead.
func TestBadAnnotations(t *testing.T) {
	tests := []struct {
		name string
		a    map[string]string
		want string
	}{
		{"a URL without scheme", map[string]string{AnnotationReloadURL: "127.0.0.1:9090/-/reload"}, `hotreload.dev/reload-url "127.0.0.1:9090/-/reload": not a URL; want an http or https URL`},
		{"a URL of another scheme", map[string]string{AnnotationReloadURL: "ftp://127.0.0.1/"}, `want an http or https URL`},
		{"a URL without host", map[string]string{AnnotationReloadURL: "http:///-/reload"}, "the URL has no host"},
		{"a URL with a password", map[string]string{AnnotationReloadURL: "http://admin:s3cret@127.0.0.1/-/reload"}, "the URL holds credentials"},
		{"an empty URL", map[string]string{AnnotationReloadURL: " "}, "want the URL that reloads the app"},
		{"not a URL", map[string]string{AnnotationReloadURL: "http://[::1"}, "not a URL"},
		{"an unknown signal", map[string]string{AnnotationSignal: "SIGFOO", AnnotationProcessName: "x", AnnotationRunAsUser: "1"}, `hotreload.dev/signal "SIGFOO": unknown signal; want a signal such as SIGHUP`},
		{"SIGKILL", map[string]string{AnnotationSignal: "KILL", AnnotationProcessName: "x"}, "cannot be caught"},
		{"a signal without a process", map[string]string{AnnotationSignal: "HUP"}, "hotreload.dev/signal needs hotreload.dev/process-name (or hotreload.dev/process-cmdline)"},
		{"a restart without a process", map[string]string{AnnotationRestart: "true"}, "hotreload.dev/restart needs hotreload.dev/process-name"},
		{"restart is not a boolean", map[string]string{AnnotationRestart: "yes please"}, `hotreload.dev/restart "yes please": want "true" or "false"`},
		{"rollout is not a boolean", map[string]string{AnnotationRollout: "on", AnnotationReloadURL: "http://x/"}, `hotreload.dev/rollout "on": want "true" or "false"`},
		{"a rollout alone", map[string]string{AnnotationRollout: "true"}, "hotreload.dev/rollout needs a way to tell the app"},
		{"a restart and a URL", map[string]string{AnnotationRestart: "true", AnnotationReloadURL: "http://x/", AnnotationProcessName: "x"}, "give one, a restarted app reads its config anew"},
		{"a process without a signal", map[string]string{AnnotationReloadURL: "http://x/", AnnotationProcessName: "nginx"}, "need hotreload.dev/signal or hotreload.dev/restart"},
		{"a name and a command line", map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "nginx", AnnotationProcessCmdline: "nginx"}, "give one"},
		{"a path as a process name", map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "/usr/sbin/nginx"}, "want the name of the app's process"},
		{"a bad regular expression", map[string]string{AnnotationSignal: "HUP", AnnotationProcessCmdline: "nginx("}, "want a regular expression"},
		{"a user that is not a number", map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "x", AnnotationRunAsUser: "nginx"}, "want the app's numeric user id"},
		{"a negative user", map[string]string{AnnotationSignal: "HUP", AnnotationProcessName: "x", AnnotationRunAsUser: "-1"}, "want the app's numeric user id"},
		{"a user for a webhook", map[string]string{AnnotationReloadURL: "http://x/", AnnotationRunAsUser: "1"}, "is for hotreload.dev/signal or hotreload.dev/restart"},
		{"no volumes", map[string]string{AnnotationReloadURL: "http://x/", AnnotationVolumes: ", "}, "want the names of the volumes to watch"},
		{"an empty container", map[string]string{AnnotationReloadURL: "http://x/", AnnotationContainer: ""}, "want the name of the app's container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ParseAnnotations(tt.a)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

func TestUnknownAnnotationsWarn(t *testing.T) {
	_, warnings, err := ParseAnnotations(map[string]string{AnnotationReloadURL: "http://x/", "hotreload.dev/reload-uri": "x", "hotreload.dev/volume": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 2 || !strings.HasPrefix(warnings[0], "hotreload.dev/reload-uri: not an annotation of hotreload") || !strings.HasPrefix(warnings[1], "hotreload.dev/volume:") {
		t.Errorf("warnings %q", warnings)
	}
}
