package tune

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// CheckWritableDir creates dir if needed and checks that a file can be
// created in it, so that a bad --dir fails before any work starts.
func CheckWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--dir %s: cannot create the directory: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".strata-tune-probe-*")
	if err != nil {
		return fmt.Errorf("--dir %s: not writable: %w", dir, err)
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("--dir %s: not writable: %w", dir, err)
	}
	return nil
}

// TableBytes returns the total size of the table files (*.sst) under dir,
// as stat reports them: what the table files occupy on disk by their
// length, WAL, MANIFEST and OPTIONS files not counted.
func TableBytes(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".sst") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sum of table sizes in %s: %w", dir, err)
	}
	return total, nil
}

// workDir is where a command's databases go: a fresh directory under
// --dir (kept), or a temporary one (removed by cleanup).
type workDir struct {
	path string
	keep bool
}

// newWorkDir makes a fresh directory named prefix-* under parent, or under
// the system's temporary directory when parent is "".
func newWorkDir(parent, prefix string) (*workDir, error) {
	if parent != "" {
		if err := CheckWritableDir(parent); err != nil {
			return nil, err
		}
		p, err := os.MkdirTemp(parent, prefix+"-")
		if err != nil {
			return nil, fmt.Errorf("--dir %s: %w", parent, err)
		}
		return &workDir{path: p, keep: true}, nil
	}
	p, err := os.MkdirTemp("", "strata-tune-"+prefix+"-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	return &workDir{path: p}, nil
}

// done removes a run's directory unless the work directory is kept.
func (w *workDir) done(dir string) error {
	if w.keep {
		return nil
	}
	return os.RemoveAll(dir)
}

// cleanup removes the work directory unless it is kept.
func (w *workDir) cleanup() error {
	if w.keep {
		return nil
	}
	return os.RemoveAll(w.path)
}

// slug turns a profile or candidate name into a directory name: runs of
// anything but ASCII letters and digits become one '-' ("lz4 / zstd:6" is
// "lz4-zstd-6").
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	return b.String()
}
