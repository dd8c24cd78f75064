package processmetrics

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// userHZ is the unit of the times in /proc/PID/stat: USER_HZ, 100 on every
// Linux that Go runs on (client_golang's procfs assumes it too).
const userHZ = 100

type collector struct {
	descs
	start    float64 // seconds since the epoch; 0 if it could not be read
	pageSize float64

	mu  sync.Mutex // guards buf: the registry may collect concurrently
	buf []byte     // holds one /proc file or directory listing at a time
}

// New returns a collector of this process's process_* metrics. The start
// time is read now; if a file cannot be read, the metrics that it gives
// are left out, as client_golang's collector leaves them out.
func New() prometheus.Collector {
	c := &collector{descs: newDescs(), pageSize: float64(unix.Getpagesize()), buf: make([]byte, 8192)}
	if st, err := c.stat(); err == nil {
		if boot, err := c.bootTime(); err == nil {
			c.start = boot + float64(st.startTicks)/userHZ
		}
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) { c.describe(ch) }

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, err := c.stat(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, float64(st.utime+st.stime)/userHZ)
		ch <- prometheus.MustNewConstMetric(c.vsize, prometheus.GaugeValue, float64(st.vsize))
		ch <- prometheus.MustNewConstMetric(c.rss, prometheus.GaugeValue, float64(st.rss)*c.pageSize)
	}
	if c.start != 0 {
		ch <- prometheus.MustNewConstMetric(c.descs.start, prometheus.GaugeValue, c.start)
	}
	if n, err := c.openFiles(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.openFDs, prometheus.GaugeValue, float64(n))
	}
	var nofile, as unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile) == nil && unix.Getrlimit(unix.RLIMIT_AS, &as) == nil {
		ch <- prometheus.MustNewConstMetric(c.maxFDs, prometheus.GaugeValue, float64(nofile.Cur))
		ch <- prometheus.MustNewConstMetric(c.maxVsize, prometheus.GaugeValue, float64(as.Cur))
	}
	if in, out, err := c.netOctets(); err == nil {
		ch <- prometheus.MustNewConstMetric(c.in, prometheus.CounterValue, in)
		ch <- prometheus.MustNewConstMetric(c.out, prometheus.CounterValue, out)
	}
}

// read reads the whole file at path into c.buf, growing it if needed, and
// returns what it read.
func (c *collector) read(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	n := 0
	for {
		if n == len(c.buf) {
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		m, err := unix.Read(fd, c.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return c.buf[:n], nil
		}
		n += m
	}
}

// procStat is what the collector uses of /proc/self/stat.
type procStat struct {
	utime, stime, startTicks, vsize, rss uint64
}

var errFormat = errors.New("unexpected format")

// stat reads /proc/self/stat.
func (c *collector) stat() (procStat, error) {
	b, err := c.read("/proc/self/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(b)
}

// parseStat parses a /proc/PID/stat line. Its fields are separated by
// spaces, after the command name in parentheses, which may itself hold
// spaces and parentheses: fields are counted from the last ')'.
func parseStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, errFormat
	}
	// From the state (field 3 of proc(5)) on: utime is field 14, stime 15,
	// starttime 22, vsize 23, rss 24.
	var st procStat
	field := 3
	for f := range bytes.FieldsSeq(b[i+2:]) {
		var dst *uint64
		switch field {
		case 14:
			dst = &st.utime
		case 15:
			dst = &st.stime
		case 22:
			dst = &st.startTicks
		case 23:
			dst = &st.vsize
		case 24:
			dst = &st.rss
		}
		if dst != nil {
			n, err := parseUint(f)
			if err != nil {
				return procStat{}, err
			}
			*dst = n
		}
		if field == 24 {
			return st, nil
		}
		field++
	}
	return procStat{}, errFormat
}

// bootTime reads the btime line of /proc/stat: the boot time in seconds
// since the epoch.
func (c *collector) bootTime() (float64, error) {
	b, err := c.read("/proc/stat")
	if err != nil {
		return 0, err
	}
	return parseBootTime(b)
}

func parseBootTime(b []byte) (float64, error) {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := parseUint(bytes.TrimSpace(v))
			return float64(n), err
		}
	}
	return 0, errFormat
}

// openFiles counts the entries of /proc/self/fd (the descriptor it reads
// them with included, as client_golang counts it).
func (c *collector) openFiles() (int, error) {
	fd, err := unix.Open("/proc/self/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	count := 0
	for {
		n, err := unix.Getdents(fd, c.buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 {
			return count, nil
		}
		m, err := countDirents(c.buf[:n])
		if err != nil {
			return 0, err
		}
		count += m
	}
}

// countDirents counts the entries other than "." and ".." in b, a buffer of
// linux_dirent64 records: inode (8 bytes), offset (8), record length (2),
// type (1), the name ending with a NUL.
func countDirents(b []byte) (int, error) {
	count := 0
	for len(b) > 0 {
		if len(b) < 19 {
			return 0, errFormat
		}
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < 19 || reclen > len(b) {
			return 0, errFormat
		}
		name := b[19:reclen]
		if j := bytes.IndexByte(name, 0); j >= 0 {
			name = name[:j]
		}
		if string(name) != "." && string(name) != ".." {
			count++
		}
		b = b[reclen:]
	}
	return count, nil
}

// netOctets reads InOctets and OutOctets of the IpExt lines of
// /proc/self/net/netstat: a header line of names, then a line of values.
func (c *collector) netOctets() (in, out float64, err error) {
	b, err := c.read("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, err
	}
	return parseNetstat(b)
}

func parseNetstat(b []byte) (in, out float64, err error) {
	prefix := []byte("IpExt:")
	var names []byte
	for line := range bytes.Lines(b) {
		if !bytes.HasPrefix(line, prefix) {
			continue
		}
		if names == nil {
			names = line
			continue
		}
		found := 0
		values := bytes.Fields(line[len(prefix):])
		i := 0
		for name := range bytes.FieldsSeq(names[len(prefix):]) {
			if i >= len(values) {
				break
			}
			switch string(name) {
			case "InOctets", "OutOctets":
				n, err := parseUint(values[i])
				if err != nil {
					return 0, 0, err
				}
				if name[0] == 'I' {
					in = float64(n)
				} else {
					out = float64(n)
				}
				found++
			}
			i++
		}
		if found != 2 {
			return 0, 0, errFormat
		}
		return in, out, nil
	}
	return 0, 0, errFormat
}

// parseUint parses a decimal count as the kernel prints it.
func parseUint(b []byte) (uint64, error) {
	var n uint64
	if len(b) == 0 {
		return 0, errFormat
	}
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, errFormat
		}
		n = n*10 + uint64(d-'0')
	}
	return n, nil
}
