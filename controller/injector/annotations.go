package injector

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hotreload/hotreload/controller"
	"github.com/hotreload/hotreload/controller/rollout"
)

// The annotations a pod (its template) sets to ask for the sidecar. Any of
// the first four opts the pod in; the rest refine it. docs/injector.md has
// the table.
const (
	// AnnotationReloadURL is the URL that reloads the app, such as
	// http://127.0.0.1:9090/-/reload; several are separated by commas.
	AnnotationReloadURL = "hotreload.dev/reload-url"
	// AnnotationSignal is the signal that reloads the app, such as SIGHUP,
	// sent to the process that AnnotationProcessName names.
	AnnotationSignal = "hotreload.dev/signal"
	// AnnotationRestart "true" restarts the app's container in place when
	// the controller assigns the pod a new revision (docs/restart.md).
	AnnotationRestart = "hotreload.dev/restart"
	// AnnotationRollout "true" lets the controller choose the revision the
	// pod runs (docs/rollout.md).
	AnnotationRollout = "hotreload.dev/rollout"

	// AnnotationProcessName names the app's process for a signal or a
	// restart (its comm or executable's base name); AnnotationProcessCmdline
	// is a regular expression on its command line instead.
	AnnotationProcessName    = "hotreload.dev/process-name"
	AnnotationProcessCmdline = "hotreload.dev/process-cmdline"
	// AnnotationContainer names the app's container: the one whose user
	// may be signalled, whose process restarts, and whose env refs are
	// followed. Default: the pod's first container.
	AnnotationContainer = "hotreload.dev/container"
	// AnnotationVolumes lists the volumes to watch, by name, separated by
	// commas. Default: every ConfigMap, Secret and projected volume that a
	// container of the pod mounts whole.
	AnnotationVolumes = "hotreload.dev/volumes"
	// AnnotationRunAsUser is the user that may signal the app, for an app
	// container that sets no runAsUser (its image decides).
	AnnotationRunAsUser = "hotreload.dev/run-as-user"

	// AnnotationInjected is set by the injector on every pod it admitted
	// with the sidecar: "native" or "classic" when it added it, "present"
	// when the pod had it already. An opted-in pod without it was admitted
	// without the injector (see Missed).
	AnnotationInjected = "hotreload.dev/injected"
	// AnnotationNudge opts a pod in to the controller's nudges; the
	// injector sets it to "true" unless the pod sets it.
	AnnotationNudge = "hotreload.dev/nudge"
)

// knownAnnotations are the hotreload.dev/ annotations a pod may carry: the
// injector's, and those of the controller (its nudges, its rollouts and
// restarts) and the sidecar. Any other is taken for a typo and warned
// about.
var knownAnnotations = []string{
	AnnotationReloadURL, AnnotationSignal, AnnotationRestart, AnnotationRollout,
	AnnotationProcessName, AnnotationProcessCmdline, AnnotationContainer, AnnotationVolumes, AnnotationRunAsUser,
	AnnotationInjected, AnnotationNudge, controller.AnnotationNudged, controller.AnnotationRevisions,
	rollout.AnnotationRestartBatch, rollout.AnnotationSingleReplica,
}

const prefix = "hotreload.dev/"

// Request is what a pod's annotations ask of the injector.
type Request struct {
	ReloadURLs     []string
	Signal         string
	ProcessName    string
	ProcessCmdline string
	Restart        bool
	Rollout        bool
	Container      string   // "" for the first container
	Volumes        []string // nil for every suitable one
	RunAsUser      *int64
}

// Signals reports whether the sidecar must reach the app's process: for a
// signal or a restart.
func (r Request) Signals() bool { return r.Signal != "" || r.Restart }

// Views reports whether the volumes become views: their content written by
// the sidecar into the app's directory, as the pod's revision annotation
// chooses.
func (r Request) Views() bool { return r.Rollout || r.Restart }

// OptedIn reports whether annotations ask for the sidecar: one of
// reload-url, signal, restart or rollout is set, whatever its value (a
// value that does not parse is an opt-in that went wrong, to be reported).
func OptedIn(annotations map[string]string) bool {
	for _, k := range []string{AnnotationReloadURL, AnnotationSignal, AnnotationRestart, AnnotationRollout} {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// ParseAnnotations reads the injector's annotations. Each problem is one
// error that names its annotation; with any, the pod gets no sidecar.
// warnings are about annotations that change nothing: unknown names under
// hotreload.dev/, most likely typos.
func ParseAnnotations(a map[string]string) (r Request, warnings []string, err error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		v := a[key]
		if key == AnnotationReloadURL {
			v = redactURLs(v)
		}
		errs = append(errs, fmt.Errorf("%s %q: %s", key, v, fmt.Sprintf(format, args...)))
	}
	for k := range a {
		if strings.HasPrefix(k, prefix) && !slices.Contains(knownAnnotations, k) {
			warnings = append(warnings, fmt.Sprintf("%s: not an annotation of hotreload, ignored (known: %s)", k, strings.Join(knownAnnotations[:9], ", ")))
		}
	}
	slices.Sort(warnings)

	if v, ok := a[AnnotationReloadURL]; ok {
		for _, u := range splitList(v) {
			if msg := checkURL(u); msg != "" {
				bad(AnnotationReloadURL, "%s", msg)
				continue
			}
			r.ReloadURLs = append(r.ReloadURLs, u)
		}
		if len(r.ReloadURLs) == 0 && len(errs) == 0 {
			bad(AnnotationReloadURL, "want the URL that reloads the app, such as http://127.0.0.1:9090/-/reload")
		}
	}
	if v, ok := a[AnnotationSignal]; ok {
		if err := checkSignal(v); err != nil {
			bad(AnnotationSignal, "%v; want a signal such as SIGHUP", err)
		} else {
			r.Signal = strings.TrimSpace(v)
		}
	}
	boolean := func(key string) bool {
		v, ok := a[key]
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			bad(key, `want "true" or "false"`)
		}
		return b
	}
	r.Restart = boolean(AnnotationRestart)
	r.Rollout = boolean(AnnotationRollout)

	if v, ok := a[AnnotationProcessName]; ok {
		r.ProcessName = strings.TrimSpace(v)
		if r.ProcessName == "" || strings.ContainsAny(r.ProcessName, "/,") {
			bad(AnnotationProcessName, "want the name of the app's process, such as nginx")
		}
	}
	if v, ok := a[AnnotationProcessCmdline]; ok {
		r.ProcessCmdline = v
		if _, err := regexp.Compile(v); err != nil || strings.TrimSpace(v) == "" {
			bad(AnnotationProcessCmdline, "want a regular expression on the app's command line")
		}
	}
	if v, ok := a[AnnotationContainer]; ok {
		r.Container = strings.TrimSpace(v)
		if r.Container == "" {
			bad(AnnotationContainer, "want the name of the app's container")
		}
	}
	if v, ok := a[AnnotationVolumes]; ok {
		r.Volumes = splitList(v)
		if len(r.Volumes) == 0 {
			bad(AnnotationVolumes, "want the names of the volumes to watch, separated by commas")
		}
	}
	if v, ok := a[AnnotationRunAsUser]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n < 0 || n > 1<<31-1 {
			bad(AnnotationRunAsUser, "want the app's numeric user id, such as 101")
		} else {
			r.RunAsUser = &n
		}
	}

	// Together.
	_, hasSignal := a[AnnotationSignal]
	_, hasName := a[AnnotationProcessName]
	_, hasCmdline := a[AnnotationProcessCmdline]
	signals := hasSignal || r.Restart
	reloads := len(r.ReloadURLs) > 0 || r.Signal != ""
	switch {
	case len(errs) > 0:
	case !reloads && !r.Restart && !r.Rollout:
		// "false" everywhere: not opted in after all.
		return Request{}, warnings, errNotOptedIn
	case r.Restart && reloads:
		errs = append(errs, fmt.Errorf("%s with %s or %s: give one, a restarted app reads its config anew", AnnotationRestart, AnnotationReloadURL, AnnotationSignal))
	case r.Rollout && !reloads && !r.Restart:
		errs = append(errs, fmt.Errorf("%s needs a way to tell the app: %s, %s or %s", AnnotationRollout, AnnotationReloadURL, AnnotationSignal, AnnotationRestart))
	}
	switch {
	case signals && !hasName && !hasCmdline:
		errs = append(errs, fmt.Errorf("%s needs %s (or %s): the app's process, such as nginx", signalOrRestart(r), AnnotationProcessName, AnnotationProcessCmdline))
	case !signals && (hasName || hasCmdline):
		errs = append(errs, fmt.Errorf("%s and %s need %s or %s", AnnotationProcessName, AnnotationProcessCmdline, AnnotationSignal, AnnotationRestart))
	case hasName && hasCmdline:
		errs = append(errs, fmt.Errorf("%s and %s: give one", AnnotationProcessName, AnnotationProcessCmdline))
	}
	if r.RunAsUser != nil && !signals {
		errs = append(errs, fmt.Errorf("%s is for %s or %s: only they need the app's user", AnnotationRunAsUser, AnnotationSignal, AnnotationRestart))
	}
	return r, warnings, errors.Join(errs...)
}

// errNotOptedIn is what ParseAnnotations returns for a pod whose opt-in
// annotations all say "false".
var errNotOptedIn = errors.New("not opted in")

func signalOrRestart(r Request) string {
	if r.Restart {
		return AnnotationRestart
	}
	return AnnotationSignal
}

// splitList splits a list separated by commas or white space (a comma
// inside a URL is written %2C).
func splitList(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
}

// checkURL says what is wrong with a reload URL, or "".
func checkURL(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "not a URL; want an http or https URL, such as http://127.0.0.1:9090/-/reload"
	case u.Scheme != "http" && u.Scheme != "https":
		return "want an http or https URL, such as http://127.0.0.1:9090/-/reload"
	case u.Host == "":
		return "the URL has no host: the app listens on 127.0.0.1 in the pod"
	case u.User != nil:
		// Annotations are readable by whoever can read the pod.
		return "the URL holds credentials, which an annotation would show to whoever can read the pod: run your own sidecar with --webhook-bearer-token-file instead"
	}
	return ""
}

// redactURLs hides the passwords of the URLs in a list, for messages: an
// error is shown to kubectl, in an Event and in the log.
func redactURLs(list string) string {
	parts := splitList(list)
	for i, p := range parts {
		if u, err := url.Parse(p); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		} else if err != nil && strings.Contains(p, "@") {
			parts[i] = "(not shown: it may hold credentials)"
		}
	}
	return strings.Join(parts, ",")
}
