//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/procfs"
)

// A container's processes, seen from the host: the suite runs as root on
// the node, so /proc shows every pod's processes with their real ids and
// capabilities, which nothing inside a FROM-scratch image could show.
type hostProc struct {
	PID, PPID      int
	Comm           string
	UID, GID       uint64 // effective
	CapEff, CapBnd uint64
	Start          uint64 // start time in clock ticks since boot
}

// containerID returns the runtime's id of a container of a pod.
func containerID(t *testing.T, ns, name, container string) string {
	t.Helper()
	p, err := getPod(ns, name)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.container(container)
	if !ok || c.ContainerID == "" {
		t.Fatalf("pod %s/%s has no running container %q", ns, name, container)
	}
	_, id, _ := strings.Cut(c.ContainerID, "://")
	return id
}

// procsOf returns the processes whose cgroup names the container id.
func procsOf(t *testing.T, id string) []hostProc {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	all, err := fs.AllProcs()
	if err != nil {
		t.Fatal(err)
	}
	var out []hostProc
	for _, p := range all {
		cgroups, err := p.Cgroups()
		if err != nil {
			continue // gone meanwhile
		}
		in := false
		for _, c := range cgroups {
			if strings.Contains(c.Path, id) {
				in = true
				break
			}
		}
		if !in {
			continue
		}
		stat, err1 := p.Stat()
		status, err2 := p.NewStatus()
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, hostProc{
			PID: p.PID, PPID: stat.PPID, Comm: stat.Comm,
			UID: status.UIDs[1], GID: status.GIDs[1],
			CapEff: status.CapEff, CapBnd: status.CapBnd, Start: stat.Starttime,
		})
	}
	return out
}

// mainProc returns the topmost process of a container (the one whose parent
// is not in it).
func mainProc(t *testing.T, ns, name, container string) hostProc {
	t.Helper()
	procs := procsOf(t, containerID(t, ns, name, container))
	in := map[int]bool{}
	for _, p := range procs {
		in[p.PID] = true
	}
	for _, p := range procs {
		if !in[p.PPID] {
			return p
		}
	}
	t.Fatalf("no process found for container %s of %s/%s", container, ns, name)
	return hostProc{}
}

// children returns the processes of a container whose parent is pid.
func children(t *testing.T, ns, name, container string, pid int) []hostProc {
	t.Helper()
	var out []hostProc
	for _, p := range procsOf(t, containerID(t, ns, name, container)) {
		if p.PPID == pid {
			out = append(out, p)
		}
	}
	return out
}

// kill sends sig to a host pid.
func kill(t *testing.T, p hostProc, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.PID, sig); err != nil {
		t.Fatalf("kill %d (%s): %v", p.PID, p.Comm, err)
	}
}

const capKill = 5 // CAP_KILL's bit

func (p hostProc) String() string {
	return fmt.Sprintf("%s[%d] uid %d gid %d CapEff %#x CapBnd %#x", p.Comm, p.PID, p.UID, p.GID, p.CapEff, p.CapBnd)
}
