package config

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hotreload/hotreload/reloader"
)

// The notifier and reloader packages name options by their fields; the
// command line must show the flags, in exactly these words.
func TestTargetErrorsNameFlags(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	vol := "--volume-dir=" + dir
	url := "--webhook-url=http://127.0.0.1:9090/-/reload"
	for _, tt := range []struct {
		name string
		args []string
		want string // the whole error
	}{
		{"scheme", []string{vol, "--webhook-url=ftp://admin:s3cret@h/"}, `--webhook-url "ftp://admin:xxxxx@h/": scheme must be http or https`},
		{"no host", []string{vol, "--webhook-url=http:///-/reload"}, `--webhook-url "http:///-/reload": no host`},
		{"does not parse", []string{vol, "--webhook-url=http://127.0.0.1:90 90/"}, `--webhook-url "http://...": not a valid URL; percent-encode / ? # % @ and spaces in its user and password (%2F %3F %23 %25 %40 %20)`},
		{"does not parse, no scheme", []string{vol, "--webhook-url=a:b@h:90 90/"}, `--webhook-url: not a valid URL; percent-encode / ? # % @ and spaces in its user and password (%2F %3F %23 %25 %40 %20)`},
		{"url twice", []string{vol, url, url}, `--webhook-url "http://127.0.0.1:9090/-/reload": given twice`},
		{"method", []string{vol, url, "--webhook-method=PO ST"}, `--webhook-method "PO ST": not a valid HTTP method`},
		{"status code", []string{vol, url, "--webhook-status-code=2x5"}, `--webhook-status-code "2x5": want a code such as 200 or a class such as 2xx`},
		{"header", []string{vol, url, "--webhook-header=Foo"}, `--webhook-header: want "Name: value"; this one has no colon (not shown, as it may hold a secret)`},
		{"two sources of Authorization", []string{vol, "--webhook-url=http://u:p@h/", "--webhook-bearer-token-file=" + missing},
			`--webhook-bearer-token-file and the user in --webhook-url both set Authorization: use one`},
		{"header and user", []string{vol, "--webhook-url=http://u:p@h/", "--webhook-header=Authorization: x"},
			`--webhook-header "Authorization" and the user in --webhook-url both set Authorization: use one`},
		{"token file is a directory", []string{vol, url, "--webhook-bearer-token-file=" + dir}, "--webhook-bearer-token-file " + dir + ": is a directory"},
		{"CA file missing", []string{vol, url, "--webhook-ca-file=" + missing}, "--webhook-ca-file " + missing + ": open " + missing + ": no such file or directory"},
		{"CA file without certificates", []string{vol, url, "--webhook-ca-file=" + notPEM}, "--webhook-ca-file " + notPEM + ": no certificates found"},
		{"cert without key", []string{vol, url, "--webhook-cert-file=" + notPEM}, "--webhook-cert-file and --webhook-key-file go together"},
		{"cert not PEM", []string{vol, url, "--webhook-cert-file=" + notPEM, "--webhook-key-file=" + notPEM},
			"--webhook-cert-file " + notPEM + " with --webhook-key-file " + notPEM + ": tls: failed to find any PEM data in certificate input"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := parseAll(t, tt.args...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v,\nwant %s", err, tt.want)
			}
		})
	}
}

func TestOpenStateFile(t *testing.T) {
	dir := t.TempDir()
	c := &Config{StateFile: filepath.Join(dir, "nope", "state.json")}
	_, err := OpenStateFile(c)
	want := "--state-file " + c.StateFile + ": directory " + filepath.Dir(c.StateFile) + " does not exist (mount an emptyDir there)"
	if err == nil || err.Error() != want {
		t.Errorf("OpenStateFile = %v, want %s", err, want)
	}
	if s, err := OpenStateFile(&Config{}); s != nil || err != nil {
		t.Errorf("OpenStateFile without --state-file = %v, %v, want nil, nil", s, err)
	}
}

// A webhook target stays a reloader.Prober, and its errors keep their cause.
func TestWebhookTargetProbesAndUnwraps(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, targets, err := parseAll(t, "--volume-dir=/etc/config", "--webhook-url=http://"+addr+"/-/reload")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := targets[0].(reloader.Prober)
	if !ok {
		t.Fatalf("the webhook target %T is not a reloader.Prober", targets[0])
	}
	if p.Reachable(context.Background()) {
		t.Errorf("Reachable = true with nothing listening on %s", addr)
	}
	if err := targets[0].Notify(context.Background()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("Notify = %v, want an error that is ECONNREFUSED", err)
	}
}

// TestNewWatcherNamesTheFlag: the watcher's error about a directory names
// the flag it came from, in one line, with the hint for a subPath mount.
func TestNewWatcherNamesTheFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "app.conf")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse([]string{"--volume-dir=" + file, "--webhook-url=http://127.0.0.1:1/"}, "test", io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewWatcher(nil, nil, cfg)
	want := "--volume-dir " + file + ": is a file, not a directory: a subPath mount never updates: mount the whole volume into hotreload's container (no subPath) and give its mount path"
	if err == nil || err.Error() != want {
		t.Fatalf("NewWatcher: %v\nwant %s", err, want)
	}

	cfg, err = Parse([]string{"--volume-dir=" + t.TempDir(), "--optional-volume-dir=" + file, "--webhook-url=http://127.0.0.1:1/"}, "test", io.Discard, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = NewWatcher(nil, nil, cfg); err == nil || !strings.HasPrefix(err.Error(), "--optional-volume-dir "+file+": is a file") {
		t.Fatalf("NewWatcher: %v, want an error naming --optional-volume-dir", err)
	}
}

// TestHeaderValueNeverShown: a --webhook-header that does not parse is
// refused in one line naming the flag, and nothing of it is shown: without
// its colon, name and value cannot be told apart, and a typo of the name
// may hold the value.
func TestHeaderValueNeverShown(t *testing.T) {
	vol := "--volume-dir=" + t.TempDir()
	url := "--webhook-url=http://127.0.0.1:9090/-/reload"
	for _, tt := range []struct {
		name    string
		headers []string
		want    string
	}{
		{"= for :", []string{"X-Api-Key=S3cretTok"},
			`--webhook-header: want "Name: value"; this one has no colon (not shown, as it may hold a secret)`},
		{"space for :", []string{"X-Api-Key S3cretTok"},
			`--webhook-header: want "Name: value"; this one has no colon (not shown, as it may hold a secret)`},
		{"the value alone", []string{"X-A: b", "S3cretTok"},
			`--webhook-header #2: want "Name: value"; this one has no colon (not shown, as it may hold a secret)`},
		{"a name that holds the value", []string{"X-Api-Key=S3cretTok: x"},
			`--webhook-header: not a valid header name (not shown, as it may hold a secret)`},
		{"a value with a newline", []string{"X-Api-Key: S3cretTok\nX: y"},
			`--webhook-header "X-Api-Key": value has a control character`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{vol, url}
			for _, h := range tt.headers {
				args = append(args, "--webhook-header="+h)
			}
			_, _, err := parseAll(t, args...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v,\nwant %s", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "S3cret") {
				t.Errorf("error %q shows the header's value", err)
			}
		})
	}
}

// TestStateFileInsideVolume: a state file in a watched directory would make
// every save a change, and every change a save: refused at start, also
// through a symbolic link or a subdirectory.
func TestStateFileInsideVolume(t *testing.T) {
	vol := t.TempDir()
	sub := filepath.Join(vol, "conf.d")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(vol, link); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	for _, tt := range []struct{ name, dir, state, want string }{
		{"in the volume", vol, filepath.Join(vol, "state.json"),
			"--state-file " + vol + "/state.json: inside --volume-dir " + vol + ", where every save would be a change: put it on an emptyDir of its own"},
		{"in a subdirectory", vol, filepath.Join(sub, "state.json"),
			"--state-file " + sub + "/state.json: inside --volume-dir " + vol + ", where every save would be a change: put it on an emptyDir of its own"},
		{"through a link to the volume", link, filepath.Join(vol, "state.json"),
			"--state-file " + vol + "/state.json: inside --volume-dir " + link + ", where every save would be a change: put it on an emptyDir of its own"},
		{"elsewhere", vol, filepath.Join(elsewhere, "state.json"), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, "--volume-dir="+tt.dir, "--webhook-url=http://127.0.0.1:9090/-/reload", "--state-file="+tt.state)
			if err != nil {
				t.Fatal(err)
			}
			s, err := OpenStateFile(c)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("OpenStateFile = %v", err)
				}
				s.Close()
				return
			}
			if err == nil || err.Error() != tt.want {
				t.Errorf("OpenStateFile = %v,\nwant %s", err, tt.want)
			}
		})
	}
}
