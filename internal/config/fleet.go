package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotreload/hotreload/view"
)

// FleetConfig is the command line of views (a revision chosen per pod and
// written into the app's directory, docs/rollout.md) and of in-place
// restarts (docs/design/fleet.md).
type FleetConfig struct {
	Views          []view.Config
	PodAnnotations string // --pod-annotations; "" for none

	RestartContainer bool
	RestartGrace     time.Duration
	RestartTimeout   time.Duration
	RestartSettle    time.Duration
	RestartDrain     time.Duration
}

func (c *Config) registerFleet(flag func(name, help string) *kingpin.FlagClause, duration func(name, help, def string, d *time.Duration)) {
	f := &c.Fleet
	flag("view", "Write a revision of a ConfigMap or Secret into the app's directory, as the kubelet writes a volume, with last-known-good: ref=configmap/NAME,source=DIR,dir=DIR[,stable=DIR][,expand=GLOB]. The pod's annotation, the stable copy and the source choose the revision; without stable and --pod-annotations, the source's. ref=configmap/NAME alone follows the annotation only (config in env vars, with --restart-container). Repeatable.").
		PlaceHolder("VIEW").SetValue(&viewsValue{&f.Views})
	flag("pod-annotations", "File of the pod's annotations (a downwardAPI volume of metadata.annotations), whose hotreload.dev/revisions names the revision each view runs.").
		PlaceHolder("FILE").SetValue(nonEmptyValue{"pod-annotations", &f.PodAnnotations, "the file of a downwardAPI volume item, such as /hotreload/pod/annotations"})
	flag("restart-container", "Reload by restarting the app's container in place: SIGTERM to the process --process-name, --process-cmdline or --pid-file names (shareProcessNamespace: true), SIGKILL after --restart-grace; the kubelet starts it again in the same pod.").
		SetValue(boolValue{"restart-container", &f.RestartContainer})
	duration("restart-grace", "With --restart-container, how long the app may take to exit after SIGTERM before SIGKILL; set it to the pod's terminationGracePeriodSeconds.", "30s", &f.RestartGrace)
	duration("restart-timeout", "With --restart-container, how long to wait for the kubelet to run the app again; a restart that does not come back is a refused config.", "5m", &f.RestartTimeout)
	duration("restart-settle", "With --restart-container, how long the restarted app must stay up for the restart to count; one that exits sooner refused the config.", "2s", &f.RestartSettle)
	duration("restart-drain", "With --restart-container, how long /-/ready reports not Ready before the app is stopped, so that the pod leaves its Services first; give the sidecar a readinessProbe on /-/ready whose period times failureThreshold is under it. 0 stops the app at once.", "0s", &f.RestartDrain)
}

// checkFleet checks the fleet flags with the rest of the command line.
func (c *Config) checkFleet() error {
	f := c.Fleet
	if f.PodAnnotations != "" {
		if !filepath.IsAbs(f.PodAnnotations) {
			return fmt.Errorf("--pod-annotations %s: want an absolute path, such as /hotreload/pod/annotations", f.PodAnnotations)
		}
		if info, err := os.Stat(f.PodAnnotations); err == nil && info.IsDir() {
			return fmt.Errorf("--pod-annotations %s: is a directory; want the file of the downwardAPI volume item, such as %s", f.PodAnnotations, filepath.Join(f.PodAnnotations, "annotations"))
		}
		if len(f.Views) == 0 {
			return errors.New("--pod-annotations needs a --view: the annotation names the revision a view runs")
		}
	}
	for _, v := range f.Views {
		for _, d := range c.VolumeDirs {
			if v.HasVolume() && nested(filepath.Clean(d), v.Dir) {
				return fmt.Errorf("--view %s: dir %s and --volume-dir %s overlap: hotreload writes the app's directory, and watches the source instead", v.Ref, v.Dir, d)
			}
		}
		if v.HasVolume() {
			continue
		}
		if !f.RestartContainer || f.PodAnnotations == "" {
			return fmt.Errorf("--view ref=%s has no source and dir: it follows the pod's annotation alone (config in env vars, read again only when the container restarts), which needs --restart-container and --pod-annotations", v.Ref)
		}
	}
	if !f.RestartContainer {
		return nil
	}
	s := c.Signal
	switch {
	case s.Signal != "":
		return errors.New("--restart-container and --signal: give one, both act on the process that --process-name, --process-cmdline or --pid-file names")
	case len(c.WebhookURLs) > 0:
		return errors.New("--restart-container and --webhook-url: give one, a restarted app reads its config anew")
	case s.ProcessName == "" && s.ProcessCmdline == "" && s.PIDFile == "":
		return errors.New("--restart-container needs --process-name, --process-cmdline or --pid-file: the app's main process")
	case s.Force:
		return errors.New("--signal-force does not apply to --restart-container, which sends SIGTERM and SIGKILL")
	}
	if f.PodAnnotations == "" {
		return nil
	}
	// With the annotation, a restart must come only from a revision the
	// controller assigns: the kubelet rewrites every pod's volumes within
	// a minute, and a restart on each rewrite would restart them all.
	if len(c.VolumeDirs) > 0 {
		return fmt.Errorf("--volume-dir %s with --restart-container and --pod-annotations: every refresh by the kubelet would restart the app, in every pod at about the same time; use a --view with stable=", c.VolumeDirs[0])
	}
	for _, v := range f.Views {
		if v.HasVolume() && v.Stable == "" {
			return fmt.Errorf("--view ref=%s: with --restart-container and --pod-annotations a view needs stable= (the controller's stable copy): without it every refresh by the kubelet would restart the app, in every pod at about the same time", v.Ref)
		}
	}
	return nil
}

// NewViews builds the views of c, or returns nil when there is none; key
// is --content-key-file's (see ContentKey). Its errors name the flag.
func NewViews(logger log.Logger, reg prometheus.Registerer, c *Config, key []byte) (*view.Stage, error) {
	if len(c.Fleet.Views) == 0 {
		return nil, nil
	}
	s, err := view.New(logger, reg, view.Options{Views: c.Fleet.Views, Annotations: c.Fleet.PodAnnotations, VolumeDirs: c.VolumeDirs, Key: key, Hint: c.Hint})
	if err != nil {
		return nil, fmt.Errorf("--view: %w", err)
	}
	return s, nil
}

// watchDirs returns the directories to watch: --volume-dir, then those of
// the views (sources, stable copies, the annotations file's directory),
// each once, with the flag that names each for errors.
func (c *Config) watchDirs() ([]string, map[string]string) {
	dirs := slices.Clone(c.VolumeDirs)
	flags := map[string]string{}
	for _, d := range c.VolumeDirs {
		flags[d] = "--volume-dir " + d
	}
	for _, d := range c.OptionalDirs {
		flags[d] = "--optional-volume-dir " + d
	}
	add := func(d, flag string) {
		if _, ok := flags[d]; !ok {
			dirs = append(dirs, d)
			flags[d] = flag
		}
	}
	for _, v := range c.Fleet.Views {
		if v.Source != "" {
			add(v.Source, fmt.Sprintf("--view ref=%s: source %s", v.Ref, v.Source))
		}
		if v.Stable != "" {
			add(v.Stable, fmt.Sprintf("--view ref=%s: stable %s", v.Ref, v.Stable))
		}
	}
	if c.Fleet.PodAnnotations != "" {
		d := filepath.Dir(c.Fleet.PodAnnotations)
		add(d, "--pod-annotations "+c.Fleet.PodAnnotations+": directory "+d)
	}
	return dirs, flags
}

// viewsValue is the repeatable --view.
type viewsValue struct{ views *[]view.Config }

func (v *viewsValue) Set(s string) error {
	c, err := view.ParseConfig(s)
	if err != nil {
		return fmt.Errorf("--view %q: %w", s, err)
	}
	*v.views = append(*v.views, c)
	return nil
}

func (v *viewsValue) String() string {
	var out []string
	for _, c := range *v.views {
		out = append(out, c.Ref.String())
	}
	return strings.Join(out, ",")
}

func (v *viewsValue) IsCumulative() bool { return true }

// nested reports whether one of two clean absolute paths is the other or
// holds it.
func nested(a, b string) bool {
	in := func(p, dir string) bool {
		return p == dir || dir == "/" || strings.HasPrefix(p, dir+string(filepath.Separator))
	}
	return in(a, b) || in(b, a)
}
