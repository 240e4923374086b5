package fsutil

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
)

// Listing lists every file and directory under dirs with its size and
// modification time, one line each, sorted. Two listings taken around a
// read-only command are equal exactly when it changed nothing that an
// operator (or a backup tool comparing mtimes) would see.
func Listing(dirs ...string) ([]string, error) {
	var out []string
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s %d %s", path, info.Size(), info.ModTime().Format("15:04:05.000000000")))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("fsutil: list %s: %w", dir, err)
		}
	}
	sort.Strings(out)
	return out, nil
}
