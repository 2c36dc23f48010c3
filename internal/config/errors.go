package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// KeyError is one problem with one key: a value the file could not decode,
// an unknown key, or a value Validate rejects. Load, FromArgs and Reload
// return the errors.Join of all of them; use errors.As to get one.
type KeyError struct {
	// Key is the config-file key: "interval", "weights[2]", "paths.sys".
	Key string
	// Value is the bad value: the decoded value for a validation error,
	// the text as written for a decoding error, nil for an unknown key.
	Value any
	// Origin says where the value came from: "FILE:LINE", "--flag",
	// "$DOCKER_HOST", or "" for a built-in default or a Config checked
	// with Validate alone.
	Origin string
	// Msg says what is wrong and, where it helps, what would be right.
	Msg string
}

func (e *KeyError) Error() string {
	var b strings.Builder
	if e.Origin != "" {
		b.WriteString(e.Origin)
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		if e.Value != nil {
			b.WriteString("=")
			b.WriteString(formatValue(e.Value))
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func formatValue(v any) string {
	switch v := v.(type) {
	case string, Source, Actuator:
		return fmt.Sprintf("%q", v)
	case time.Duration:
		return fmtDuration(v)
	}
	return fmt.Sprint(v)
}

// origins records where each key's value came from, to fill in
// KeyError.Origin for validation errors.
type origins struct {
	file  string
	lines map[string]int    // key as in KeyError.Key (and root keys) -> line in file
	flags map[string]string // root key -> "--flag"
	env   map[string]string // root key -> "$VAR"
}

// of returns the origin of key. A flag wins over the file (it was applied
// last), the file over the environment.
func (o *origins) of(key string) string {
	if o == nil {
		return ""
	}
	root := rootKey(key)
	if f, ok := o.flags[root]; ok {
		return f
	}
	if l, ok := o.lines[key]; ok {
		return fmt.Sprintf("%s:%d", o.file, l)
	}
	if l, ok := o.lines[root]; ok {
		return fmt.Sprintf("%s:%d", o.file, l)
	}
	if e, ok := o.env[root]; ok {
		return e
	}
	return ""
}

// rootKey strips a list index: "weights[2]" -> "weights".
func rootKey(key string) string {
	if i := strings.IndexByte(key, '['); i >= 0 {
		return key[:i]
	}
	return key
}

// annotate sets the Origin of every *KeyError in err that has none.
func annotate(err error, o *origins) error {
	if err == nil {
		return nil
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		var ke *KeyError
		if errors.As(e, &ke) && ke.Origin == "" {
			c := *ke
			c.Origin = o.of(c.Key)
			e = &c
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}
