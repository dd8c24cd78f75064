package kubemem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/test/support/e2etest"
)

// write creates the files of a fake cgroup directory.
func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  Stats
	}{
		{
			name: "cgroup v1: the total_ figures, kmem apart",
			files: map[string]string{
				"memory.usage_in_bytes":      "12582912\n",
				"memory.kmem.usage_in_bytes": "1048576\n",
				// rss and the like are this cgroup's own; total_ ones
				// include its children, as usage does.
				"memory.stat": "cache 1\nrss 2\nmapped_file 3\ninactive_file 4\nactive_file 5\n" +
					"total_cache 8388608\ntotal_rss 3145728\ntotal_mapped_file 2097152\ntotal_inactive_file 6291456\ntotal_active_file 2097152\n",
			},
			want: Stats{Usage: 12582912, WorkingSet: 12582912 - 6291456, Anon: 3145728, File: 8388608,
				ActiveFile: 2097152, InactiveFile: 6291456, MappedFile: 2097152, Kernel: 1048576},
		},
		{
			name: "cgroup v1 without kernel memory accounting",
			files: map[string]string{
				"memory.usage_in_bytes": "4096\n",
				"memory.stat":           "total_rss 4096\ntotal_inactive_file 0\n",
			},
			want: Stats{Usage: 4096, WorkingSet: 4096, Anon: 4096},
		},
		{
			name: "cgroup v2 with a kernel figure",
			files: map[string]string{
				"memory.current": "10000000\n",
				"memory.stat":    "anon 3000000\nfile 6000000\nkernel 1000000\nkernel_stack 5\nfile_mapped 2000000\ninactive_file 4000000\nactive_file 2000000\n",
			},
			want: Stats{Usage: 10000000, WorkingSet: 6000000, Anon: 3000000, File: 6000000,
				ActiveFile: 2000000, InactiveFile: 4000000, MappedFile: 2000000, Kernel: 1000000},
		},
		{
			name: "cgroup v2 before the kernel figure: its parts",
			files: map[string]string{
				"memory.current": "100\n",
				"memory.stat":    "anon 10\nfile 0\nkernel_stack 1\npagetables 2\npercpu 3\nsock 4\nslab 5\ninactive_file 0\n",
			},
			want: Stats{Usage: 100, WorkingSet: 100, Anon: 10, Kernel: 15},
		},
		{
			name: "more inactive file than usage (figures read at different times): 0, as cAdvisor",
			files: map[string]string{
				"memory.usage_in_bytes": "100\n",
				"memory.stat":           "total_inactive_file 200\n",
			},
			want: Stats{Usage: 100, WorkingSet: 0, InactiveFile: 200},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read(write(t, tc.files))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Read =\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"not a memory cgroup", map[string]string{"cgroup.procs": ""}, "neither memory.usage_in_bytes (cgroup v1) nor memory.current (cgroup v2)"},
		{"no memory.stat", map[string]string{"memory.current": "1\n"}, "memory.stat"},
		{"a bad number", map[string]string{"memory.usage_in_bytes": "lots\n", "memory.stat": ""}, `parse`},
		{"a bad stat line", map[string]string{"memory.current": "1\n", "memory.stat": "anon x\n"}, `"anon x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(write(t, tc.files))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Read error = %v, want one that says %q", err, tc.want)
			}
		})
	}
}

// The test's own cgroup, as a benchmark reads a sidecar's: the figures add
// up as the kernel keeps them.
func TestReadSelf(t *testing.T) {
	dir, err := CgroupOf("/sys/fs/cgroup", os.Getpid())
	if err != nil {
		e2etest.SkipOrFail(t, "no memory cgroup for this process: %v", err)
	}
	s, err := Read(dir)
	if err != nil {
		e2etest.SkipOrFail(t, "the memory cgroup of this process is not readable here: %v", err)
	}
	if s.Usage == 0 || s.Anon == 0 || s.WorkingSet > s.Usage {
		t.Errorf("%s: %+v: want usage and anonymous memory (this test runs in it), and a working set within usage", dir, s)
	}
}

func TestParseProcCgroup(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
	}{
		{"v1 hybrid, as on a kubelet node with cgroupfs",
			"12:pids:/kubepods/besteffort/pod1/abc\n4:memory:/kubepods/besteffort/pod1/abc\n0::/\n",
			"/sys/fs/cgroup/memory/kubepods/besteffort/pod1/abc"},
		{"v1, memory joined with another controller", "3:cpu,memory:/x\n", "/sys/fs/cgroup/memory/x"},
		{"v2 only", "0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope\n",
			"/sys/fs/cgroup/kubepods.slice/kubepods-pod1.slice/cri-containerd-abc.scope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcCgroup("/sys/fs/cgroup", []byte(tc.text))
			if err != nil || got != tc.want {
				t.Errorf("parseProcCgroup = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := parseProcCgroup("/sys/fs/cgroup", []byte("2:cpu:/x\n")); err == nil {
		t.Error("parseProcCgroup found a memory cgroup in a file that has none")
	}
}

// A trimmed /stats/summary of a kubelet 1.33.
const summaryDoc = `{
 "node": {"nodeName": "localhost", "memory": {"usageBytes": 999}},
 "pods": [
  {"podRef": {"name": "web", "namespace": "other", "uid": "1"},
   "containers": [{"name": "hotreload", "memory": {"usageBytes": 1, "workingSetBytes": 1}}]},
  {"podRef": {"name": "web", "namespace": "demo", "uid": "2"},
   "containers": [
    {"name": "app", "memory": {"time": "2026-11-25T10:00:00Z", "usageBytes": 50000000, "workingSetBytes": 40000000, "rssBytes": 30000000}},
    {"name": "hotreload", "memory": {"time": "2026-11-25T10:00:00Z", "availableBytes": 26000000, "usageBytes": 9601024, "workingSetBytes": 6397952, "rssBytes": 3145728, "pageFaults": 1, "majorPageFaults": 0}},
    {"name": "starting"}
   ]}
 ]
}`

func TestFromSummary(t *testing.T) {
	got, err := FromSummary([]byte(summaryDoc), "demo", "web", "hotreload")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Stats{Usage: 9601024, WorkingSet: 6397952, Anon: 3145728}); got != want {
		t.Errorf("FromSummary = %+v, want %+v", got, want)
	}
	for _, tc := range []struct {
		ns, pod, container, want string
	}{
		{"demo", "web", "sidecar", "no container sidecar in pod demo/web"},
		{"demo", "db", "hotreload", "no pod demo/db"},
		{"demo", "web", "starting", "no memory figures for container starting of pod demo/web yet"},
	} {
		_, err := FromSummary([]byte(summaryDoc), tc.ns, tc.pod, tc.container)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromSummary(%s, %s, %s) error = %v, want one that says %q", tc.ns, tc.pod, tc.container, err, tc.want)
		}
		if errors.Is(err, ErrNoFigures) != (tc.container == "starting") {
			t.Errorf("FromSummary(%s, %s, %s) error = %v: errors.Is ErrNoFigures = %v", tc.ns, tc.pod, tc.container, err, errors.Is(err, ErrNoFigures))
		}
	}
	if _, err := FromSummary([]byte("<html>"), "demo", "web", "hotreload"); err == nil {
		t.Error("FromSummary parsed HTML")
	}
}

func ExampleStats_String() {
	s := Stats{Usage: 12 << 20, WorkingSet: 6 << 20, Anon: 4 << 20, ActiveFile: 1 << 20, InactiveFile: 6 << 20, Kernel: 1 << 20}
	fmt.Println(s)
	// Output: usage 12.00 MiB, working set 6.00 MiB (anon 4.00, active file 1.00, inactive file 6.00, kernel 1.00)
}
