package view

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Config is one view: a ref and where its revisions come from and go.
type Config struct {
	Ref Ref
	// Source is the source volume's mount path; "" for a ref with no
	// volume (config in env vars: the view only follows the annotation,
	// and a restart delivers it).
	Source string
	// Dir is the app's directory; "" exactly when Source is.
	Dir string
	// Stable is the stable copy's mount path; "" for none.
	Stable string
	// Expand names the files (globs on the path) whose $(VAR) references
	// are expanded from hotreload's environment.
	Expand []string
}

// HasVolume reports whether the view writes a directory.
func (c Config) HasVolume() bool { return c.Dir != "" }

// ParseConfig reads the value of a --view flag:
// ref=configmap/NAME,source=PATH,dir=PATH[,stable=PATH][,expand=GLOB]...,
// or ref=configmap/NAME alone for config in env vars. expand may be given
// more than once. Paths must be absolute.
func ParseConfig(s string) (Config, error) {
	var c Config
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || v == "" {
			return Config{}, fmt.Errorf("%q: want key=value, such as ref=configmap/app-config,source=/hotreload/source/app,dir=/etc/app", part)
		}
		if seen[k] && k != "expand" {
			return Config{}, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		switch k {
		case "ref":
			r, err := ParseRef(v)
			if err != nil {
				return Config{}, err
			}
			c.Ref = r
		case "source", "dir", "stable":
			if !filepath.IsAbs(v) {
				return Config{}, fmt.Errorf("%s %q: want an absolute path", k, v)
			}
			v = filepath.Clean(v)
			switch k {
			case "source":
				c.Source = v
			case "dir":
				c.Dir = v
			case "stable":
				c.Stable = v
			}
		case "expand":
			if err := CheckGlob(v); err != nil {
				return Config{}, fmt.Errorf("expand %w", err)
			}
			c.Expand = append(c.Expand, v)
		default:
			return Config{}, fmt.Errorf("unknown key %q: want ref, source, dir, stable or expand", k)
		}
	}
	if err := c.check(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// check checks c on its own.
func (c Config) check() error {
	switch {
	case c.Ref.Kind == "":
		return errors.New("ref is required, such as ref=configmap/app-config")
	case c.Source == "" && c.Dir != "":
		return errors.New("dir needs source: the volume whose revisions are written there")
	case c.Source != "" && c.Dir == "":
		return errors.New("source needs dir: the app's directory (an emptyDir) to write revisions into")
	case c.Dir == "" && (c.Stable != "" || len(c.Expand) > 0):
		return errors.New("stable and expand need source and dir")
	}
	paths := map[string]string{"source": c.Source, "stable": c.Stable}
	for _, k := range []string{"source", "stable"} {
		if p := paths[k]; p != "" && overlaps(c.Dir, p) {
			return fmt.Errorf("dir %s and %s %s overlap: the app's directory must be a directory of its own", c.Dir, k, p)
		}
	}
	if c.Stable != "" && c.Stable == c.Source {
		return fmt.Errorf("stable and source are both %s", c.Source)
	}
	return nil
}

// checkAll checks views together, and with the annotations file.
func checkAll(views []Config, annotations string) error {
	for i, v := range views {
		if err := v.check(); err != nil {
			return fmt.Errorf("view %s: %w", v.Ref, err)
		}
		if !v.HasVolume() && annotations == "" {
			return fmt.Errorf("view %s has no volume: it follows the pod's annotation alone, which needs the annotations file", v.Ref)
		}
		if annotations != "" && v.HasVolume() && overlaps(v.Dir, filepath.Dir(annotations)) {
			return fmt.Errorf("view %s: dir %s and the annotations file %s overlap", v.Ref, v.Dir, annotations)
		}
		for _, o := range views[:i] {
			switch {
			case o.Ref == v.Ref:
				return fmt.Errorf("view %s given twice", v.Ref)
			case v.HasVolume() && o.HasVolume() && slices.ContainsFunc([]string{o.Dir, o.Source, o.Stable}, func(p string) bool { return p != "" && overlaps(v.Dir, p) }):
				return fmt.Errorf("views %s and %s: dir %s overlaps a directory of %s", o.Ref, v.Ref, v.Dir, o.Ref)
			case v.HasVolume() && o.HasVolume() && slices.ContainsFunc([]string{v.Source, v.Stable}, func(p string) bool { return p != "" && overlaps(o.Dir, p) }):
				return fmt.Errorf("views %s and %s: dir %s overlaps a directory of %s", o.Ref, v.Ref, o.Dir, v.Ref)
			}
		}
	}
	return nil
}

// overlaps reports whether one of two clean absolute paths is the other or
// holds it.
func overlaps(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	within := func(p, dir string) bool {
		return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator)) || dir == "/"
	}
	return within(a, b) || within(b, a)
}
