package engine

import "path/filepath"

// samePath reports whether a and b name the same directory once made
// absolute and cleaned.
func samePath(a, b string) bool {
	return absPath(a) == absPath(b)
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}
