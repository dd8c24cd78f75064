// Package kubemem reads a container's memory the way the kubelet counts it,
// for the benchmarks (test/cost) and the real-cluster suite (test/e2e): its
// memory cgroup's usage and working set, from the cgroup itself (Read, with
// CgroupOf to find a process's cgroup) or from the kubelet's
// /stats/summary (FromSummary).
//
// The working set is what `kubectl top`, the kubelet's eviction and the
// memory-based autoscalers use: the cgroup's usage minus its inactive file
// pages (cAdvisor's computation, total_inactive_file on cgroup v1,
// inactive_file on v2). Usage also counts the page cache the container read
// (its binary, with the kernel's read-ahead) whether or not it is still
// used; the OOM killer acts on usage once the kernel cannot reclaim.
//
// It is test support: nothing that ships imports it.
package kubemem

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Stats are a container's memory in bytes. Usage and WorkingSet are the
// kubelet's figures; the others say where they go, as far as the source
// tells (the summary API gives only Usage, WorkingSet and Anon).
type Stats struct {
	Usage      uint64 // memory.usage_in_bytes (v1), memory.current (v2)
	WorkingSet uint64 // Usage minus InactiveFile, as the kubelet computes it

	Anon         uint64 // anonymous memory: heap, stacks, written data (v1 total_rss, v2 anon)
	File         uint64 // page cache charged to the cgroup (v1 total_cache, v2 file)
	ActiveFile   uint64 // page cache on the active list: counted in the working set
	InactiveFile uint64 // page cache on the inactive list: not counted
	MappedFile   uint64 // page cache mapped into a process (v1 total_mapped_file, v2 file_mapped)
	Kernel       uint64 // kernel memory charged to the cgroup: slab, sockets, page tables, stacks
}

// workingSet is usage minus the inactive file pages, never below zero
// (cAdvisor's rule).
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile > usage {
		return 0
	}
	return usage - inactiveFile
}

// MiB formats n bytes in MiB with two decimals.
func MiB(n uint64) string { return strconv.FormatFloat(float64(n)/(1<<20), 'f', 2, 64) }

func (s Stats) String() string {
	return fmt.Sprintf("usage %s MiB, working set %s MiB (anon %s, active file %s, inactive file %s, kernel %s)",
		MiB(s.Usage), MiB(s.WorkingSet), MiB(s.Anon), MiB(s.ActiveFile), MiB(s.InactiveFile), MiB(s.Kernel))
}

// Read reads the memory of the cgroup whose directory is dir: a cgroup v1
// memory cgroup (it has memory.usage_in_bytes) or a cgroup v2 one (it has
// memory.current).
func Read(dir string) (Stats, error) {
	v1 := true
	usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if errors.Is(err, fs.ErrNotExist) {
		v1 = false
		usage, err = readUint(filepath.Join(dir, "memory.current"))
		if errors.Is(err, fs.ErrNotExist) {
			return Stats{}, fmt.Errorf("read memory of cgroup %s: neither memory.usage_in_bytes (cgroup v1) nor memory.current (cgroup v2) is there", dir)
		}
	}
	if err != nil {
		return Stats{}, err
	}
	st, err := readStat(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return Stats{}, err
	}
	s := Stats{Usage: usage}
	if v1 {
		// The total_ figures include the cgroup's descendants, as usage
		// does.
		s.Anon, s.File, s.MappedFile = st["total_rss"], st["total_cache"], st["total_mapped_file"]
		s.ActiveFile, s.InactiveFile = st["total_active_file"], st["total_inactive_file"]
		// Kernel memory is charged to usage too where it is accounted
		// (not every kernel does); without the file it stays 0.
		if k, err := readUint(filepath.Join(dir, "memory.kmem.usage_in_bytes")); err == nil {
			s.Kernel = k
		}
	} else {
		s.Anon, s.File, s.MappedFile = st["anon"], st["file"], st["file_mapped"]
		s.ActiveFile, s.InactiveFile = st["active_file"], st["inactive_file"]
		var ok bool
		if s.Kernel, ok = st["kernel"]; !ok { // kernels before 5.18 list the parts only
			s.Kernel = st["kernel_stack"] + st["pagetables"] + st["percpu"] + st["sock"] + st["slab"]
		}
	}
	s.WorkingSet = workingSet(s.Usage, s.InactiveFile)
	return s, nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

// readStat reads the "name value" lines of a memory.stat file.
func readStat(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %q: %w", path, sc.Text(), err)
		}
		out[name] = n
	}
	return out, nil
}

// CgroupOf returns the directory of the memory cgroup of the process pid,
// under the cgroup file system mounted at root (normally /sys/fs/cgroup),
// from /proc/PID/cgroup: the v1 memory hierarchy's, or else the v2
// unified one. From the host, a container's main process gives its
// container's cgroup.
func CgroupOf(root string, pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	dir, err := parseProcCgroup(root, b)
	if err != nil {
		return "", fmt.Errorf("process %d: %w", pid, err)
	}
	return dir, nil
}

// parseProcCgroup finds the memory cgroup in the text of /proc/PID/cgroup
// ("ID:CONTROLLERS:PATH" lines).
func parseProcCgroup(root string, text []byte) (string, error) {
	unified := ""
	for line := range strings.Lines(string(text)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			if c == "memory" {
				return filepath.Join(root, "memory", f[2]), nil
			}
		}
		if f[0] == "0" && f[1] == "" {
			unified = f[2]
		}
	}
	if unified == "" {
		return "", errors.New("no memory cgroup in /proc/PID/cgroup")
	}
	// On a hybrid v1 host the unified hierarchy has no memory controller;
	// the v1 line returned above. Here the host is v2 only.
	return filepath.Join(root, unified), nil
}

// summary is the part of the kubelet's /stats/summary that FromSummary
// reads (k8s.io/kubelet/pkg/apis/stats/v1alpha1).
type summary struct {
	Pods []struct {
		PodRef struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"podRef"`
		Containers []struct {
			Name   string `json:"name"`
			Memory *struct {
				UsageBytes      *uint64 `json:"usageBytes"`
				WorkingSetBytes *uint64 `json:"workingSetBytes"`
				RSSBytes        *uint64 `json:"rssBytes"`
			} `json:"memory"`
		} `json:"containers"`
	} `json:"pods"`
}

// ErrNoFigures is FromSummary's error for a container that the summary
// lists without its usage and working set (a container just started, or a
// kubelet whose stats provider has none for it).
var ErrNoFigures = errors.New("no memory figures")

// FromSummary returns the memory of one container from the kubelet's
// /stats/summary document (what `kubectl get --raw
// /api/v1/nodes/NODE/proxy/stats/summary` prints): Usage, WorkingSet and
// Anon (the summary's rssBytes); the other fields stay 0. The kubelet
// refreshes these figures every 10 to 15 s (its housekeeping interval).
func FromSummary(doc []byte, namespace, pod, container string) (Stats, error) {
	var s summary
	if err := json.Unmarshal(doc, &s); err != nil {
		return Stats{}, fmt.Errorf("parse the kubelet's stats summary: %w", err)
	}
	for _, p := range s.Pods {
		if p.PodRef.Namespace != namespace || p.PodRef.Name != pod {
			continue
		}
		for _, c := range p.Containers {
			if c.Name != container {
				continue
			}
			if c.Memory == nil || c.Memory.UsageBytes == nil || c.Memory.WorkingSetBytes == nil {
				return Stats{}, fmt.Errorf("the kubelet's stats summary has %w for container %s of pod %s/%s yet", ErrNoFigures, container, namespace, pod)
			}
			st := Stats{Usage: *c.Memory.UsageBytes, WorkingSet: *c.Memory.WorkingSetBytes}
			if c.Memory.RSSBytes != nil {
				st.Anon = *c.Memory.RSSBytes
			}
			return st, nil
		}
		return Stats{}, fmt.Errorf("the kubelet's stats summary has no container %s in pod %s/%s", container, namespace, pod)
	}
	return Stats{}, fmt.Errorf("the kubelet's stats summary has no pod %s/%s", namespace, pod)
}
