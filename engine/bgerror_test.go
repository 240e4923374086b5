package engine

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/stratadb/strata/config"
)

// recordingLogger keeps the lines of each kind.
type recordingLogger struct {
	mu          sync.Mutex
	infos, errs []string
}

func (l *recordingLogger) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.infos = append(l.infos, fmt.Sprintf(format, args...))
}

func (l *recordingLogger) Errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, fmt.Sprintf(format, args...))
}

// TestBackgroundErrorsReported fails the table writes of a flush, which
// Pebble reports through its BackgroundError event and retries: the error
// must reach Metrics, Stats and the Logger's Errorf, never an
// informational line, and the flush completes once writes succeed again.
func TestBackgroundErrorsReported(t *testing.T) {
	var failTables atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failTables.Load() && op.Kind == errorfs.OpFileWrite && strings.HasSuffix(op.Path, ".sst") {
			return errorfs.ErrInjected
		}
		return nil
	})
	cfg := config.Default()
	cfg.DBPath = "/db"
	log := &recordingLogger{}
	db, err := Open(cfg, Options{FS: errorfs.Wrap(vfs.NewMem(), inj), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	failTables.Store(true)
	defer failTables.Store(false) // before Close, so a failed test does not hang in the retried flush
	flushed := make(chan error, 1)
	go func() { flushed <- db.Flush() }()
	var m *Metrics
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if m, err = db.Metrics(); err != nil {
			t.Fatal(err)
		}
		if m.BackgroundErrors.Count > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no background error counted while a flush failed")
		}
	}
	failTables.Store(false)
	if err := <-flushed; err != nil {
		t.Fatalf("Flush after the table writes recover = %v", err)
	}
	if !errors.Is(m.BackgroundErrors.Last, errorfs.ErrInjected) {
		t.Errorf("Metrics().BackgroundErrors = %+v, want the injected error", m.BackgroundErrors)
	}
	stats, err := db.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "Background errors: ") || !strings.Contains(stats, errorfs.ErrInjected.Error()) {
		t.Errorf("Stats does not show the background error:\n%s", stats)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	if !strings.Contains(strings.Join(log.errs, "\n"), errorfs.ErrInjected.Error()) {
		t.Errorf("Logger.Errorf got %q, want the background error", log.errs)
	}
	for _, line := range log.infos {
		if strings.Contains(line, errorfs.ErrInjected.Error()) {
			t.Errorf("an error went to Infof: %q", line)
		}
	}
}
