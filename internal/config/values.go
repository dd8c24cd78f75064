package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// The values below name their flag in every error, which kingpin's own
// values do not ("time: invalid duration" says nothing about which flag).

// durationBounds is what a duration flag accepts: 0 when off is allowed,
// else a value from min to max. A value outside does harm rather than
// something the user wants, see the table in durationLimits.
type durationBounds struct {
	off      bool // 0 is allowed and turns the feature off
	min, max time.Duration
}

// durationLimits holds the bounds of every duration flag. Why these:
//   - debounce: under 1ms is no debounce at all (the kubelet's one update
//     takes about that); the longest wait is 10 times it, so an hour caps a
//     change's wait at 10h, and 10 times it cannot overflow.
//   - resync-interval: each resync hashes every volume; under a second that
//     keeps a core busy for nothing, a day is the longest worth waiting for
//     a missed event or a failed target's retry.
//   - poll-interval: the same hashing; 100ms already polls 10 times a
//     second, and an hour is the longest a volume may go unnoticed.
//   - webhook-timeout: a reload request under 100ms never succeeds (a
//     Prometheus reload takes longer); one over 10m means a hung app.
//   - webhook-max-backoff: under 100ms retries a failing app thousands of
//     times a second; over 10m is longer than a reload is worth waiting for.
//   - webhook-refused-max-backoff: the same from below; over 1h, an app
//     whose refusal was passing (a file it reads appeared later) would
//     wait too long, as the next change is sent at once anyway.
//   - shutdown-grace: 0 stops at once; 10m is longer than any pod's
//     terminationGracePeriodSeconds that makes sense for a sidecar.
//   - signal-confirm-timeout: 0 turns the check off; under 100ms no app has
//     started a worker; 10m as for the webhook timeout.
//   - webhook-probe-interval: each probe is a TCP connect to the app; under
//     10ms that is a busy loop against a port nobody listens on, and over a
//     minute the probe no longer helps over the backoff.
//   - restart-grace: under 1s no app shuts down cleanly; Kubernetes caps
//     nothing, but a grace over an hour holds every delivery that long.
//   - restart-timeout: under 10s the kubelet's crash-loop back-off (10s
//     after the first restart) looks like a refusal; 1h is far beyond its
//     longest back-off (5m).
//   - restart-settle: under 100ms proves nothing; 10m as for the timeouts.
//   - restart-drain: 0 turns it off; under a second no readiness probe
//     has seen it; 10m holds every restart that long.
var durationLimits = map[string]durationBounds{
	"debounce":                    {off: true, min: time.Millisecond, max: time.Hour},
	"resync-interval":             {off: true, min: time.Second, max: 24 * time.Hour},
	"poll-interval":               {min: 100 * time.Millisecond, max: time.Hour},
	"webhook-timeout":             {min: 100 * time.Millisecond, max: 10 * time.Minute},
	"webhook-max-backoff":         {min: 100 * time.Millisecond, max: 10 * time.Minute},
	"webhook-refused-max-backoff": {min: 100 * time.Millisecond, max: time.Hour},
	"shutdown-grace":              {off: true, min: 0, max: 10 * time.Minute},
	"signal-confirm-timeout":      {off: true, min: 100 * time.Millisecond, max: 10 * time.Minute},
	"webhook-probe-interval":      {off: true, min: 10 * time.Millisecond, max: time.Minute},
	"restart-grace":               {min: time.Second, max: time.Hour},
	"restart-timeout":             {min: 10 * time.Second, max: time.Hour},
	"restart-settle":              {min: 100 * time.Millisecond, max: 10 * time.Minute},
	"restart-drain":               {off: true, min: time.Second, max: 10 * time.Minute},
}

type durationValue struct {
	flag string
	d    *time.Duration
	durationBounds
}

// newDurationValue returns the value of the duration flag, with its bounds
// from durationLimits; a flag missing there takes any non-negative value.
func newDurationValue(flag string, d *time.Duration) durationValue {
	b, ok := durationLimits[flag]
	if !ok {
		b = durationBounds{off: true, max: time.Duration(1<<63 - 1)}
	}
	return durationValue{flag: flag, d: d, durationBounds: b}
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("--%s %q: want a duration such as 500ms, 30s or 2m", v.flag, s)
	}
	if d < 0 {
		return fmt.Errorf("--%s %s: must not be negative", v.flag, s)
	}
	if err := v.check(d); err != nil {
		return fmt.Errorf("--%s %s: %w", v.flag, s, err)
	}
	*v.d = d
	return nil
}

func (b durationBounds) check(d time.Duration) error {
	switch {
	case d == 0 && b.off:
		return nil
	case d >= b.min && d <= b.max:
		return nil
	case b.off && b.min == 0:
		return fmt.Errorf("must be at most %s", shortDuration(b.max))
	case b.off:
		return fmt.Errorf("must be 0 (off) or from %s to %s", shortDuration(b.min), shortDuration(b.max))
	}
	return fmt.Errorf("must be from %s to %s", shortDuration(b.min), shortDuration(b.max))
}

func (v durationValue) String() string { return shortDuration(*v.d) }

// shortDuration writes 1h rather than 1h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

type countValue struct {
	flag string
	n    *int
}

func (v countValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("--%s %q: want a whole number", v.flag, s)
	}
	if n < 0 {
		return fmt.Errorf("--%s %d: must not be negative", v.flag, n)
	}
	*v.n = n
	return nil
}

func (v countValue) String() string { return strconv.Itoa(*v.n) }

type enumValue struct {
	flag    string
	s       *string
	choices []string
}

func (v enumValue) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("--%s %q: want one of %s", v.flag, s, strings.Join(v.choices, ", "))
	}
	*v.s = s
	return nil
}

func (v enumValue) String() string { return *v.s }

// nonEmptyValue is a string flag that, once given, must say something:
// `--signal ""` is a mistake, not a way to turn the signal target off.
type nonEmptyValue struct {
	flag string
	s    *string
	want string // what to give instead, such as "a signal such as SIGHUP"
}

func (v nonEmptyValue) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("--%s %q: must not be empty; want %s", v.flag, s, v.want)
	}
	*v.s = s
	return nil
}

func (v nonEmptyValue) String() string { return *v.s }

// boolValue is a switch. From the environment it takes true or false;
// on the command line --flag and --no-flag, and --flag=true or
// --flag=false, which boolArgs rewrites before kingpin sees them.
type boolValue struct {
	flag string
	b    *bool
}

func (v boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("--%s %q: want true or false", v.flag, s)
	}
	*v.b = b
	return nil
}

func (v boolValue) String() string   { return strconv.FormatBool(*v.b) }
func (v boolValue) IsBoolFlag() bool { return true }

// goArgs rewrites the long flags of app written as Go's flag package takes
// them, with one dash (-volume-dir=/etc/config, -webhook-url URL), into
// kingpin's two: configmap-reload parses its command line with Go's flag
// package, and manifests written for it keep working unchanged. Only the
// names of app's long flags (and --no- of its switches) are rewritten, and
// never a flag's value: -h stays kingpin's short help, and an argument that
// follows a flag written without "=" is that flag's value, as in Go, even
// when it starts with a dash.
func goArgs(app *kingpin.Application, args []string) []string {
	takesValue := map[string]bool{}
	for _, f := range app.Model().Flags {
		takesValue[f.Name] = !f.IsBoolFlag()
		if f.IsBoolFlag() {
			takesValue["no-"+f.Name] = false
		}
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			return append(out, args[i:]...)
		}
		dashes := "--"
		if !strings.HasPrefix(a, "--") {
			dashes = "-"
		}
		name, _, hasValue := strings.Cut(strings.TrimPrefix(a, dashes), "=")
		v, known := takesValue[name]
		if !strings.HasPrefix(a, "-") || !known || len(name) < 2 {
			out = append(out, a)
			continue
		}
		a = "--" + strings.TrimPrefix(a, dashes)
		if v && !hasValue && i+1 < len(args) {
			// Joined, since kingpin takes no separate value that starts
			// with a dash.
			i++
			a += "=" + args[i]
		}
		out = append(out, a)
	}
	return out
}

// boolArgs rewrites --flag=true and --flag=false of app's switches into
// --flag and --no-flag. kingpin takes no value after a switch and reports
// --poll=maybe as "unexpected maybe", without naming the flag; here any
// other value is an error that does.
func boolArgs(app *kingpin.Application, args []string) ([]string, error) {
	switches := map[string]bool{}
	for _, f := range app.Model().Flags {
		if f.IsBoolFlag() {
			switches[f.Name] = true
		}
	}
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...), nil
		}
		name, val, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") || !switches[strings.TrimPrefix(name, "no-")] {
			out = append(out, a)
			continue
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			return nil, fmt.Errorf("--%s=%s: --%s takes no value, or true or false", name, val, name)
		}
		if strings.HasPrefix(name, "no-") && !switches[name] {
			name, b = strings.TrimPrefix(name, "no-"), !b
		}
		if b {
			out = append(out, "--"+name)
		} else {
			out = append(out, "--no-"+name)
		}
	}
	return out, nil
}
