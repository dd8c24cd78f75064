//go:build linux

package procsignal_test

import (
	"fmt"

	"github.com/hotreload/hotreload/procsignal"
)

func ExampleParse() {
	for _, s := range []string{"SIGHUP", "hup", "10", "SIGRTMIN+3", "SIGKILL", "FOO"} {
		sig, err := procsignal.Parse(s)
		if err != nil {
			fmt.Printf("%s: %v\n", s, err)
			continue
		}
		fmt.Printf("%s: %d %s\n", s, int(sig), procsignal.Name(sig))
	}
	// Output:
	// SIGHUP: 1 SIGHUP
	// hup: 1 SIGHUP
	// 10: 10 SIGUSR1
	// SIGRTMIN+3: 37 SIGRTMIN+3
	// SIGKILL: SIGKILL cannot be caught, so no process can reload on it
	// FOO: unknown signal
}

func ExampleSelector_Select() {
	// An nginx master with two workers, which rewrote their argv, and
	// the hotreload sidecar itself.
	procs := []procsignal.Process{
		{PID: 1, Comm: "pause", Args: []string{"/pause"}},
		{PID: 7, PPID: 1, Comm: "nginx", Args: []string{"nginx: master process /usr/sbin/nginx -g daemon off;"}},
		{PID: 30, PPID: 7, Comm: "nginx", Args: []string{"nginx: worker process"}},
		{PID: 31, PPID: 7, Comm: "nginx", Args: []string{"nginx: worker process"}},
		{PID: 12, PPID: 1, Comm: "hotreload", Args: []string{"/hotreload", "--process-name", "nginx"}},
	}
	self := 12 // os.Getpid() in the sidecar
	sel := procsignal.Selector{Name: "nginx"}
	for _, p := range sel.Select(procs, self) {
		fmt.Println(p)
	}
	// Output:
	// pid 7 (nginx)
}
