package view

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/hotreload/hotreload/internal/revision"
)

// Expand returns files with every $(NAME) reference in the files whose
// path matches one of globs (path.Match, on the slash-separated path)
// replaced by lookup(NAME). $$(NAME) is written as a literal $(NAME), as
// Kubernetes writes it in a container's args. NAME is a letter or an
// underscore, then letters, digits and underscores; anything else after
// "$(" is left as it is. A reference whose variable is not set is an
// error naming the file and the variables, never their values nor the
// content: the revision must not run with an empty string in its place.
// files is not changed.
func Expand(files []revision.File, globs []string, lookup func(string) (string, bool)) ([]revision.File, error) {
	if len(globs) == 0 {
		return files, nil
	}
	out := make([]revision.File, len(files))
	for i, f := range files {
		out[i] = f
		if !matchAny(globs, f.Path) {
			continue
		}
		data, missing := expand(f.Data, lookup)
		if len(missing) > 0 {
			refs := make([]string, len(missing))
			for j, m := range missing {
				refs[j] = "$(" + m + ")"
			}
			verb := "is"
			if len(missing) > 1 {
				verb = "are"
			}
			return nil, fmt.Errorf("expand %s: %s %s not set in hotreload's environment", f.Path, strings.Join(refs, ", "), verb)
		}
		out[i].Data = data
	}
	return out, nil
}

// CheckGlob reports whether glob is a pattern path.Match accepts.
func CheckGlob(glob string) error {
	if glob == "" {
		return fmt.Errorf("want a pattern such as *.yaml")
	}
	if _, err := path.Match(glob, ""); err != nil {
		return fmt.Errorf("%q: %w", glob, err)
	}
	return nil
}

func matchAny(globs []string, p string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, p); ok {
			return true
		}
	}
	return false
}

// expand replaces the references in b; it returns the names of the unset
// variables, sorted, each once.
func expand(b []byte, lookup func(string) (string, bool)) ([]byte, []string) {
	var (
		out     []byte
		missing []string
	)
	for i := 0; i < len(b); {
		j := i
		for j < len(b) && b[j] != '$' {
			j++
		}
		out = append(out, b[i:j]...)
		if j == len(b) {
			break
		}
		// b[j] == '$'
		if j+1 < len(b) && b[j+1] == '$' {
			if n := refLen(b[j+1:]); n > 0 {
				out = append(out, b[j+1:j+1+n]...) // $$(NAME) -> $(NAME)
				i = j + 1 + n
				continue
			}
			out = append(out, '$')
			i = j + 1
			continue
		}
		n := refLen(b[j:])
		if n == 0 {
			out = append(out, '$')
			i = j + 1
			continue
		}
		name := string(b[j+2 : j+n-1])
		if v, ok := lookup(name); ok {
			out = append(out, v...)
		} else if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		i = j + n
	}
	slices.Sort(missing)
	return out, missing
}

// refLen returns the length of the reference $(NAME) at the start of b, or
// 0 when b does not start with one.
func refLen(b []byte) int {
	if len(b) < 4 || b[0] != '$' || b[1] != '(' || !nameStart(b[2]) {
		return 0
	}
	for k := 3; k < len(b); k++ {
		switch c := b[k]; {
		case c == ')':
			return k + 1
		case !nameStart(c) && (c < '0' || c > '9'):
			return 0
		}
	}
	return 0
}

func nameStart(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
