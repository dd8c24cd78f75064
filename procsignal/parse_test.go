//go:build linux

package procsignal

import (
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    syscall.Signal
		wantErr string // substring; "" means no error
	}{
		{name: "full name", in: "SIGHUP", want: syscall.SIGHUP},
		{name: "short name", in: "HUP", want: syscall.SIGHUP},
		{name: "lower case", in: "hup", want: syscall.SIGHUP},
		{name: "mixed case with prefix", in: "SigUsr1", want: syscall.SIGUSR1},
		{name: "number", in: "1", want: syscall.SIGHUP},
		{name: "number usr2", in: "12", want: syscall.SIGUSR2},
		{name: "surrounding space", in: " USR1\n", want: syscall.SIGUSR1},
		{name: "alias", in: "SIGIOT", want: syscall.SIGABRT},
		{name: "winch", in: "WINCH", want: syscall.SIGWINCH},
		{name: "rtmin", in: "SIGRTMIN", want: 34},
		{name: "rtmin plus", in: "SIGRTMIN+3", want: 37},
		{name: "rtmax minus", in: "rtmax-1", want: 63},
		{name: "rtmax", in: "RTMAX", want: 64},
		{name: "real-time number", in: "40", want: 40},
		{name: "unknown", in: "FOO", wantErr: `unknown signal`},
		{name: "empty", in: "", wantErr: `unknown signal`},
		{name: "prefix only", in: "SIG", wantErr: "unknown signal"},
		{name: "zero", in: "0", wantErr: `signal 0 only probes a process`},
		{name: "negative", in: "-1", wantErr: "unknown signal: numbers go from 1 to 64"},
		{name: "too large", in: "65", wantErr: "unknown signal: numbers go from 1 to 64"},
		{name: "kill", in: "SIGKILL", wantErr: `SIGKILL cannot be caught`},
		{name: "kill number", in: "9", wantErr: "SIGKILL cannot be caught"},
		{name: "stop", in: "stop", wantErr: "SIGSTOP cannot be caught"},
		{name: "reserved 32", in: "32", wantErr: "signal 32 is reserved by the C library"},
		{name: "reserved 33", in: "33", wantErr: "reserved by the C library"},
		{name: "rtmin too far", in: "SIGRTMIN+31", wantErr: "real-time signals go from SIGRTMIN (34) to SIGRTMAX (64)"},
		{name: "rtmin wrong sign", in: "SIGRTMIN-1", wantErr: "unknown signal"},
		{name: "rtmax wrong sign", in: "SIGRTMAX+1", wantErr: "unknown signal"},
		{name: "rtmin garbage", in: "SIGRTMIN+x", wantErr: "unknown signal"},
		{name: "trailing garbage", in: "HUP1", wantErr: "unknown signal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestName(t *testing.T) {
	tests := []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGHUP, "SIGHUP"},
		{syscall.SIGABRT, "SIGABRT"}, // not its alias SIGIOT
		{syscall.SIGCHLD, "SIGCHLD"},
		{syscall.SIGIO, "SIGIO"},
		{34, "SIGRTMIN"},
		{37, "SIGRTMIN+3"},
		{49, "SIGRTMIN+15"},
		{50, "SIGRTMAX-14"},
		{63, "SIGRTMAX-1"},
		{64, "SIGRTMAX"},
		{32, "signal 32"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := Name(tt.sig); got != tt.want {
				t.Errorf("Name(%d) = %q, want %q", int(tt.sig), got, tt.want)
			}
		})
	}
	// Every name that Name returns parses back to its signal.
	for sig := syscall.Signal(1); sig <= sigRTMax; sig++ {
		if validate(sig) != nil {
			continue
		}
		if got, err := Parse(Name(sig)); err != nil || got != sig {
			t.Errorf("Parse(Name(%d)) = %d, %v", int(sig), got, err)
		}
	}
}

func TestDefaultAction(t *testing.T) {
	tests := []struct {
		sig  syscall.Signal
		want action
	}{
		{syscall.SIGHUP, actTerm},
		{syscall.SIGUSR1, actTerm},
		{syscall.SIGQUIT, actCore},
		{syscall.SIGCHLD, actIgn},
		{syscall.SIGURG, actIgn},
		{syscall.SIGWINCH, actIgn},
		{syscall.SIGCONT, actCont},
		{syscall.SIGTSTP, actStop},
		{syscall.SIGTTIN, actStop},
		{syscall.SIGTTOU, actStop},
		{40, actTerm},
	}
	for _, tt := range tests {
		t.Run(Name(tt.sig), func(t *testing.T) {
			if got := defaultAction(tt.sig); got != tt.want {
				t.Errorf("defaultAction(%s) = %d, want %d", Name(tt.sig), got, tt.want)
			}
		})
	}
}
