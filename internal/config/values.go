package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The values below name their flag in every error, which kingpin's own
// values do not ("time: invalid duration" says nothing about which flag).

type durationValue struct {
	flag string
	d    *time.Duration
}

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("--%s %q: want a duration such as 500ms, 30s or 2m", v.flag, s)
	}
	if d < 0 {
		return fmt.Errorf("--%s %s: must not be negative", v.flag, s)
	}
	*v.d = d
	return nil
}

func (v durationValue) String() string { return v.d.String() }

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
