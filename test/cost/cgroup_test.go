//go:build linux

package cost

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hotreload/hotreload/test/support/e2etest"
	"github.com/hotreload/hotreload/test/support/kubemem"
)

// cgroupExecEnv, in the environment of this test binary run again by
// startInCgroup, names the memory cgroup it joins before it executes its
// arguments. That is what a container runtime's init does (runc init joins
// the container's cgroups, then executes the entrypoint): everything the
// sidecar allocates or reads from then on, its binary's pages included, is
// charged to that cgroup.
const cgroupExecEnv = "COST_EXEC_IN_CGROUP"

// execInCgroup runs first in TestMain: in a test binary started by
// startInCgroup it joins the cgroup and executes the sidecar, and never
// returns.
func execInCgroup() {
	dir := os.Getenv(cgroupExecEnv)
	if dir == "" {
		return
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "cost: run %s in cgroup %s: %v\n", os.Args[1:], dir, err)
		os.Exit(127)
	}
	if len(os.Args) < 2 {
		fail(fmt.Errorf("no command"))
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
		fail(err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, cgroupExecEnv+"=") })
	fail(syscall.Exec(os.Args[1], os.Args[1:], env))
}

// memCgroup is a memory cgroup of its own for one sidecar, as a container
// has.
type memCgroup struct{ dir string }

var cgroupSeq atomic.Int64

// memoryRoot returns the root of the memory cgroups (cgroup v1's memory
// hierarchy, or the v2 hierarchy when its root delegates the memory
// controller), or why there is none.
func memoryRoot() (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("needs root to make memory cgroups")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.usage_in_bytes"); err == nil {
		return "/sys/fs/cgroup/memory", nil
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && slices.Contains(strings.Fields(string(b)), "memory") {
		return "/sys/fs/cgroup", nil
	}
	return "", fmt.Errorf("no memory cgroup controller at /sys/fs/cgroup/memory (v1) or delegated by /sys/fs/cgroup (v2)")
}

// newMemCgroup makes a memory cgroup named after this process and name, and
// removes it at the end of the test; call it before starting the process
// that runs in it, so that the process is stopped first.
func newMemCgroup(tb testing.TB, root, name string) *memCgroup {
	tb.Helper()
	dir := filepath.Join(root, fmt.Sprintf("hotreload-cost-%d-%d-%s", os.Getpid(), cgroupSeq.Add(1), name))
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatalf("make a memory cgroup: %v", err)
	}
	tb.Cleanup(func() {
		// The stopped process leaves the cgroup a moment after it is
		// reaped; its page cache moves to the parent.
		var err error
		for range 100 {
			if err = os.Remove(dir); err == nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		tb.Errorf("remove the memory cgroup %s: %v", dir, err)
	})
	return &memCgroup{dir: dir}
}

// stats reads the cgroup's memory as the kubelet counts it.
func (c *memCgroup) stats(tb testing.TB) kubemem.Stats {
	tb.Helper()
	s, err := kubemem.Read(c.dir)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// needCgroups returns the root of the memory cgroups, or skips (fails
// with CI=true) with one line saying what is missing.
func needCgroups(tb testing.TB) string {
	tb.Helper()
	root, err := memoryRoot()
	if err != nil {
		e2etest.SkipOrFail(tb, "memory in cgroups not measured: %v", err)
	}
	return root
}

// startInCgroup runs bin with args in the cgroup cg, through this test
// binary (cgroupExecEnv), and stops it at the end of the test.
func startInCgroup(tb testing.TB, name, bin string, cg *memCgroup, args ...string) *proc {
	tb.Helper()
	self, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(self, append([]string{bin}, args...)...)
	cmd.Env = append(os.Environ(), cgroupExecEnv+"="+cg.dir)
	return run(tb, name, bin, cmd)
}

// uncachedCopy copies bin into dir and drops the copy from the page cache,
// so that the process that runs it reads it from the disk, and the pages it
// reads are charged to that process's cgroup: a container that is the first
// to run its image. It fails if the kernel keeps the pages (a file system
// that cannot drop them, such as tmpfs).
func uncachedCopy(tb testing.TB, bin, dir string) string {
	tb.Helper()
	dst := filepath.Join(dir, filepath.Base(bin))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	src, err := os.Open(bin)
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, src); err != nil {
		tb.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		tb.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		tb.Fatal(err)
	}
	if n := count(cachedPages(tb, dst)); n > 0 {
		tb.Fatalf("%s: %d pages still in the page cache after it was dropped (tmpfs?): its pages would not be charged to the sidecar's cgroup", dst, n)
	}
	return dst
}

// cachedPages reports, page by page, whether the file at path is in the
// page cache (mincore on a mapping of it, which faults nothing in).
func cachedPages(tb testing.TB, path string) []bool {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if fi.Size() == 0 {
		return nil
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		tb.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+pageSize-1)/pageSize)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		tb.Fatalf("mincore %s: %v", path, errno)
	}
	out := make([]bool, len(vec))
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

var pageSize = os.Getpagesize()

func count(bits []bool) int {
	n := 0
	for _, b := range bits {
		if b {
			n++
		}
	}
	return n
}
