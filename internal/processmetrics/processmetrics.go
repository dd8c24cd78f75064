// Package processmetrics exports the process_* metrics of Prometheus's
// process collector (client_golang's collectors.NewProcessCollector): the
// same names, help, types and values, read with little garbage.
//
// The library's collector parses all of /proc/stat for the boot time,
// /proc/self/limits with a regular expression and /proc/self/net/netstat
// into maps at every scrape: some 40 KiB of garbage each time, which an
// otherwise idle sidecar, scraped every 15 s, keeps in its heap until the
// next garbage collection; in BenchmarkMemory (test/cost) it was more than
// half a MiB of working set. This collector reads the start time once, the
// limits with getrlimit(2), and the rest into a buffer it keeps. On systems
// other than Linux it is the library's collector.
package processmetrics

import "github.com/prometheus/client_golang/prometheus"

// descs are the metrics, as client_golang names and describes them.
type descs struct {
	cpu, openFDs, maxFDs, vsize, maxVsize, rss, start, in, out *prometheus.Desc
}

func newDescs() descs {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return descs{
		cpu:      d("process_cpu_seconds_total", "Total user and system CPU time spent in seconds."),
		openFDs:  d("process_open_fds", "Number of open file descriptors."),
		maxFDs:   d("process_max_fds", "Maximum number of open file descriptors."),
		vsize:    d("process_virtual_memory_bytes", "Virtual memory size in bytes."),
		maxVsize: d("process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes."),
		rss:      d("process_resident_memory_bytes", "Resident memory size in bytes."),
		start:    d("process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
		in:       d("process_network_receive_bytes_total", "Number of bytes received by the process over the network."),
		out:      d("process_network_transmit_bytes_total", "Number of bytes sent by the process over the network."),
	}
}

func (d descs) describe(ch chan<- *prometheus.Desc) {
	for _, x := range []*prometheus.Desc{d.cpu, d.openFDs, d.maxFDs, d.vsize, d.maxVsize, d.rss, d.start, d.in, d.out} {
		ch <- x
	}
}
