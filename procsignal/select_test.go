//go:build linux

package procsignal

import (
	"fmt"
	"regexp"
	"slices"
	"testing"
)

func TestMatchName(t *testing.T) {
	long := "prometheus-config-reloader" // comm: "prometheus-conf"
	tests := []struct {
		name string
		p    Process
		arg  string
		want bool
	}{
		{"comm", Process{Comm: "nginx", Args: []string{"nginx: master process nginx"}}, "nginx", true},
		{"comm other", Process{Comm: "nginx", Args: []string{"nginx"}}, "haproxy", false},
		{"comm prefix is not a match", Process{Comm: "nginx", Args: []string{"nginx"}}, "ngin", false},
		{"exe base", Process{Comm: "python3", Exe: "/usr/bin/app", Args: []string{"python3"}}, "app", true},
		{"exe full path is not a name", Process{Comm: "app", Exe: "/usr/bin/app", Args: []string{"app"}}, "/usr/bin/app", false},
		{"argv0 base", Process{Comm: "java", Args: []string{"/opt/kafka/bin/kafka", "-x"}}, "kafka", true},
		{"argv0 with spaces is one name", Process{Comm: "nginx", Args: []string{"nginx: worker process"}}, "worker", false},
		{"15 bytes exactly", Process{Comm: "abcdefghijklmno", Args: []string{"x"}}, "abcdefghijklmno", true},
		{"long name by exe", Process{Comm: long[:15], Exe: "/bin/" + long, Args: []string{"/bin/" + long}}, long, true},
		{"long name by argv0, exe unreadable", Process{Comm: long[:15], Args: []string{"/bin/" + long, "--flag"}}, long, true},
		{"long name, exe unreadable, argv rewritten", Process{Comm: long[:15], Args: []string{"reloader: main"}}, long, true},
		{"long name, exe names another program", Process{Comm: long[:15], Exe: "/bin/prometheus-config-other", Args: []string{"x"}}, long, false},
		{"long name, argv0 names another program", Process{Comm: long[:15], Args: []string{"/bin/prometheus-config-other"}}, long, false},
		{"long name, truncated comm alone is not enough for a kernel thread", Process{Comm: long[:15]}, long, false},
		{"truncated name given, comm matches", Process{Comm: long[:15], Exe: "/bin/" + long, Args: []string{long}}, long[:15], true},
		{"kernel thread by comm", Process{Comm: "kthreadd"}, "kthreadd", true},
		{"empty name", Process{Comm: ""}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MatchName(tt.p, tt.arg); got != tt.want {
				t.Errorf("MatchName(%+v, %q) = %v, want %v", tt.p, tt.arg, got, tt.want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	nginxTree := func(master int, ppid int) []Process {
		return []Process{
			{PID: master, PPID: ppid, Comm: "nginx", Exe: "/usr/sbin/nginx", Args: []string{"nginx: master process /usr/sbin/nginx -g daemon off;"}},
			{PID: master + 1, PPID: master, Comm: "nginx", Exe: "/usr/sbin/nginx", Args: []string{"nginx: worker process"}},
			{PID: master + 2, PPID: master, Comm: "nginx", Exe: "/usr/sbin/nginx", Args: []string{"nginx: worker process"}},
		}
	}
	pause := Process{PID: 1, Comm: "pause", Args: []string{"/pause"}}
	self := Process{PID: 5, PPID: 1, Comm: "hotreload", Exe: "/hotreload",
		Args: []string{"/hotreload", "--signal=HUP", "--process-cmdline", "nginx: master", "--process-name", "hotreload"}}
	shell := Process{PID: 90, PPID: 1, Comm: "sh", Exe: "/bin/sh", Args: []string{"sh", "-c", "exec nginx"}}
	kthread := Process{PID: 2, Comm: "nginx"} // a (made-up) kernel thread of the same name
	zombie := Process{PID: 60, PPID: 1, Comm: "nginx", State: 'Z'}
	long := "prometheus-config-reloader"

	procs := func(groups ...[]Process) []Process { return slices.Concat(groups...) }
	tests := []struct {
		name  string
		sel   Selector
		procs []Process
		want  []int
	}{
		{
			name:  "master not workers",
			sel:   Selector{Name: "nginx"},
			procs: procs([]Process{pause, self}, nginxTree(10, 1)),
			want:  []int{10},
		},
		{
			name:  "workers listed before their master",
			sel:   Selector{Name: "nginx"},
			procs: procs(nginxTree(10, 1)[1:], []Process{pause}, nginxTree(10, 1)[:1]),
			want:  []int{10},
		},
		{
			name:  "two independent masters",
			sel:   Selector{Name: "nginx"},
			procs: procs([]Process{pause}, nginxTree(10, 1), nginxTree(20, 1)),
			want:  []int{10, 20},
		},
		{
			name:  "master under a shell that does not match",
			sel:   Selector{Name: "nginx"},
			procs: procs([]Process{pause, shell}, nginxTree(100, 90)),
			want:  []int{100},
		},
		{
			name:  "cmdline picks the master by its rewritten argv",
			sel:   Selector{Cmdline: regexp.MustCompile(`^nginx: master`)},
			procs: procs([]Process{pause, self}, nginxTree(10, 1)),
			want:  []int{10},
		},
		{
			name:  "cmdline that also matches self never picks self",
			sel:   Selector{Cmdline: regexp.MustCompile(`nginx: master`)},
			procs: procs([]Process{pause, self}, nginxTree(10, 1)),
			want:  []int{10},
		},
		{
			name:  "name that matches self never picks self",
			sel:   Selector{Name: "hotreload"},
			procs: []Process{pause, self},
			want:  nil,
		},
		{
			name: "both selectors must match",
			sel:  Selector{Name: "nginx", Cmdline: regexp.MustCompile(`worker`)},
			// Workers match both; their parent matches only the name, so
			// the workers are topmost among the matches.
			procs: procs([]Process{pause}, nginxTree(10, 1)),
			want:  []int{11, 12},
		},
		{
			name:  "name and cmdline, cmdline excludes",
			sel:   Selector{Name: "nginx", Cmdline: regexp.MustCompile(`haproxy`)},
			procs: procs([]Process{pause}, nginxTree(10, 1)),
			want:  nil,
		},
		{
			name:  "kernel threads never match a cmdline",
			sel:   Selector{Cmdline: regexp.MustCompile(`.*`)},
			procs: []Process{kthread},
			want:  nil,
		},
		{
			name:  "zombies never match",
			sel:   Selector{Name: "nginx"},
			procs: []Process{pause, zombie},
			want:  nil,
		},
		{
			name: "long name by truncated comm, exe unreadable",
			sel:  Selector{Name: long},
			procs: []Process{pause,
				{PID: 30, PPID: 1, Comm: long[:15], Args: []string{"/bin/" + long}},
				{PID: 31, PPID: 1, Comm: long[:15], Exe: "/bin/prometheus-config-other", Args: []string{"/bin/prometheus-config-other"}},
			},
			want: []int{30},
		},
		{
			name:  "no match",
			sel:   Selector{Name: "haproxy"},
			procs: procs([]Process{pause}, nginxTree(10, 1)),
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, p := range tt.sel.Select(tt.procs, self.PID) {
				got = append(got, p.PID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Select = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectorString(t *testing.T) {
	tests := []struct {
		sel  Selector
		want string
	}{
		{Selector{Name: "nginx"}, "named nginx"},
		{Selector{Cmdline: regexp.MustCompile(`^nginx: master`)}, `whose command line matches "^nginx: master"`},
		{Selector{Name: "nginx", Cmdline: regexp.MustCompile(`x`)}, `named nginx whose command line matches "x"`},
		{Selector{}, "of any kind"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.sel.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func BenchmarkSelect(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			procs := []Process{{PID: 1, Comm: "pause", Args: []string{"/pause"}}}
			for i := 2; len(procs) < n; i += 3 {
				procs = append(procs,
					Process{PID: i, PPID: 1, Comm: "app", Args: []string{"/app", "--config", "/etc/app"}},
					Process{PID: i + 1, PPID: 1, Comm: "nginx", Args: []string{"nginx: master process nginx"}},
					Process{PID: i + 2, PPID: i + 1, Comm: "nginx", Args: []string{"nginx: worker process"}})
			}
			sel := Selector{Name: "nginx", Cmdline: regexp.MustCompile(`^nginx: master`)}
			for b.Loop() {
				sel.Select(procs, 0)
			}
		})
	}
}

// BenchmarkListProcesses scans this machine's /proc, as every Notify without
// a pid file does.
func BenchmarkListProcesses(b *testing.B) {
	procs, err := ListProcesses("")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(procs)), "procs")
	for b.Loop() {
		if _, err := ListProcesses(""); err != nil {
			b.Fatal(err)
		}
	}
}
