package config

import (
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem with one configuration key.
type FieldError struct {
	// Key is the file key, with an index for list entries ("db_paths[1].path").
	Key string
	// Value is the offending value as written.
	Value any
	// Rule says what is allowed.
	Rule string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s = %s: %s", e.Key, formatValue(e.Value), e.Rule)
}

func formatValue(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case []string:
		return string(quotedList(x))
	}
	return fmt.Sprint(v)
}

// ValidationError collects every problem Validate found. errors.As finds the
// individual FieldErrors through Unwrap.
type ValidationError struct {
	Problems []*FieldError
}

func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return fmt.Sprintf("config: %d invalid setting(s):\n  %s", len(e.Problems), strings.Join(lines, "\n  "))
}

// Unwrap returns the individual problems.
func (e *ValidationError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// quotedList shows a list of strings as a file writes it: ["none", "lz4"].
func quotedList(items []string) rawValue {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = strconv.Quote(s)
	}
	return rawValue("[" + strings.Join(quoted, ", ") + "]")
}
