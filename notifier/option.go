package notifier

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// OptionError is a problem with an option, or advice about one, in an error
// of this package or of a target package (signal, reloader). Its text names
// each option by the field that holds it, written {Field} in the format:
// Error writes the field's name (URL, CAFile), and Explain writes the name
// that the caller's user knows it by, such as a command-line flag.
type OptionError struct {
	format string // with {Field} placeholders; the rest is fmt's
	args   []any
	err    error // the format with the fields' own names, for Error and Unwrap
	cause  error // if set, what Unwrap returns instead of the error given with %w
}

// NewOptionError returns an error formatted as fmt.Errorf does, in which
// {Field} names an option. Only the format holds placeholders, never an
// argument, so a value given by the user is never taken for one.
func NewOptionError(format string, args ...any) *OptionError {
	return &OptionError{format: format, args: args, err: fmt.Errorf(fields(format, nil), args...)}
}

func (e *OptionError) Error() string { return e.err.Error() }

// Unwrap returns the error given with %w, if any.
func (e *OptionError) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	return errors.Unwrap(e.err)
}

// Explain returns the text of e with each option named by name(field), or
// by the field where name returns "".
func (e *OptionError) Explain(name func(field string) string) string {
	return fmt.Errorf(fields(e.format, name), e.args...).Error()
}

var placeholder = regexp.MustCompile(`\{[A-Z][A-Za-z]*\}`)

// fields replaces the {Field} placeholders of format.
func fields(format string, name func(string) string) string {
	return placeholder.ReplaceAllStringFunc(format, func(p string) string {
		field := p[1 : len(p)-1]
		if name != nil {
			if n := name(field); n != "" {
				return strings.ReplaceAll(n, "%", "%%")
			}
		}
		return field
	})
}

// Explain returns the text of err with the options of every OptionError in
// its tree (what errors.As looks at, errors.Join included) named by name, as
// OptionError.Explain does, and the rest of the text as it is.
func Explain(err error, name func(field string) string) string {
	text := err.Error()
	var walk func(error)
	walk = func(e error) {
		if oe, ok := e.(*OptionError); ok {
			text = strings.Replace(text, oe.Error(), oe.Explain(name), 1)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if c := u.Unwrap(); c != nil {
				walk(c)
			}
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return text
}
