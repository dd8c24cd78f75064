//go:build linux

package procsignal

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/poll"
)

// nginxConf is the static part of nginx's configuration; server.conf is the
// part that a ConfigMap would hold.
const nginxConf = `daemon off;
master_process on;
worker_processes 2;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log notice;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/server.conf;
}
`

// testNginx signals a real nginx master with two workers, as hotreload
// does with --signal=HUP --process-name=nginx: a valid configuration is
// confirmed by new workers, an invalid one, which nginx refuses and keeps
// its workers for, is reported, and the fixed one is confirmed again.
func testNginx(t *testing.T, h *harness) {
	path, err := exec.LookPath("nginx")
	if err != nil {
		if path, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			e2etest.SkipOrFail(t, "no nginx (apt-get install nginx-light): %v", err)
		}
	}
	if os.Geteuid() == 0 && !allUIDs() {
		e2etest.SkipOrFail(t, "nginx as the root of a user namespace without other uids cannot start its workers under another user")
	}
	prefix := t.TempDir()
	addr := e2etest.FreeAddr(t)
	server := func(body string) string {
		return fmt.Sprintf("server {\n    listen %s;\n    location = /version { default_type text/plain; %s }\n}\n", addr, body)
	}
	writeServer := func(conf string) {
		t.Helper()
		tmp := filepath.Join(prefix, "server.conf.tmp")
		if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(prefix, "server.conf")); err != nil {
			t.Fatal(err)
		}
	}
	writeServer(server(`return 200 "v1\n";`))
	conf := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(nginxConf, prefix)), 0o644); err != nil {
		t.Fatal(err)
	}
	ng := exec.Command(path, "-p", prefix+"/", "-c", conf, "-e", filepath.Join(prefix, "error.log"))
	h.start(t, ng)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(prefix, "error.log"))
			t.Logf("nginx's error.log:\n%s", b)
		}
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	waitServes := func(want string) {
		t.Helper()
		poll.Eventually(t, 20*time.Second, func() bool {
			resp, err := client.Get("http://" + addr + "/version")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode == http.StatusOK && string(b) == want+"\n"
		}, "waiting for nginx to serve %s", want)
	}
	waitServes("v1")
	master := ng.Process.Pid
	poll.Eventually(t, 20*time.Second, func() bool { return len(h.children(t, master)) == 2 }, "waiting for nginx's two workers")

	n := h.notifier(t, Options{ProcessName: "nginx", ConfirmTimeout: 5 * time.Second})
	reload := func(want string) []int {
		t.Helper()
		before := h.children(t, master)
		if err := n.Notify(t.Context()); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		waitServes(want)
		after := h.children(t, master)
		if !slices.ContainsFunc(after, func(pid int) bool { return !slices.Contains(before, pid) }) {
			t.Errorf("workers %v before the reload, %v after: none is new", before, after)
		}
		return after
	}

	writeServer(server(`return 200 "v2\n";`))
	workers := reload("v2")

	// nginx logs "unknown directive" and keeps its workers and the v2
	// configuration.
	writeServer(server(`retrun 200 "v3\n";`))
	err = n.Notify(t.Context())
	want := fmt.Sprintf("signal delivered but pid %d (nginx) kept its workers: the new config was probably refused; see the app's log", master)
	if err == nil || err.Error() != want {
		t.Fatalf("Notify with an invalid configuration = %v, want %q", err, want)
	}
	if now := h.children(t, master); !slices.Equal(now, workers) {
		t.Errorf("workers %v after the refused reload, want the same %v", now, workers)
	}
	waitServes("v2")
	if b, _ := os.ReadFile(filepath.Join(prefix, "error.log")); !strings.Contains(string(b), `unknown directive "retrun"`) {
		t.Errorf("nginx did not log the refused configuration:\n%s", b)
	}

	writeServer(server(`return 200 "v3\n";`))
	reload("v3")
}
