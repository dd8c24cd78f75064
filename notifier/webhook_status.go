package notifier

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// parseStatusCodes parses the StatusCodes option and returns a function
// that reports whether a status code is wanted, and the wanted codes as text
// for messages, such as "200 or 2xx". Each value is a code from 100 to 599,
// such as 200, or a class, such as 2xx; a value may also list several
// separated by commas.
func parseStatusCodes(specs []string) (match func(code int) bool, want string, err error) {
	if len(specs) == 0 {
		specs = []string{"200"}
	}
	var (
		codes   = make(map[int]bool)
		classes = make(map[int]bool)
		names   []string
	)
	for _, spec := range specs {
		for s := range strings.SplitSeq(spec, ",") {
			s = strings.TrimSpace(s)
			code, class, ok := parseStatusCode(strings.ToLower(s))
			if !ok {
				return nil, "", fmt.Errorf("status code %q: %w", s, errStatusCode)
			}
			if class > 0 {
				classes[class] = true
			} else {
				codes[code] = true
			}
			names = append(names, strings.ToLower(s))
		}
	}
	match = func(code int) bool { return codes[code] || classes[code/100] && code >= 100 && code <= 599 }
	return match, strings.Join(names, " or "), nil
}

var errStatusCode = errors.New("want a code such as 200 or a class such as 2xx")

// CheckStatusCode checks one wanted status code: a code from 100 to 599,
// such as 200, or a class, such as 2xx.
func CheckStatusCode(s string) error {
	if _, _, ok := parseStatusCode(strings.ToLower(s)); !ok {
		return errStatusCode
	}
	return nil
}

// parseStatusCode parses "200" into code 200, or "2xx" into class 2.
func parseStatusCode(s string) (code, class int, ok bool) {
	if len(s) != 3 || s[0] < '1' || s[0] > '5' {
		return 0, 0, false
	}
	if s[1:] == "xx" {
		return 0, int(s[0] - '0'), true
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, 0, false
	}
	return n, 0, true
}
