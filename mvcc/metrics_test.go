package mvcc

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// lines records what a Logger is given.
type lines struct {
	mu          sync.Mutex
	info, error []string
}

func (l *lines) Infof(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.info = append(l.info, fmt.Sprintf(format, args...))
}

func (l *lines) Errorf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.error = append(l.error, fmt.Sprintf(format, args...))
}

// TestCompactionLogged: a compaction whose deletions fail logs the error,
// and the one that finishes them logs its revision and the revisions it
// deleted, as etcd logs its compactions.
func TestCompactionLogged(t *testing.T) {
	db := openEngine(t, vfs.NewMem(), false)
	defer db.Close()
	var fail bool
	log := &lines{}
	s := openStore(t, db, Options{Logger: log, hooks: hooks{beforeCompactCommit: func(i int) error {
		if fail && i == 1 { // the ingestion of the tombstones
			return errInjected
		}
		return nil
	}}})
	defer s.Close()
	for i := range 5 {
		if _, err := s.Put([]byte("k"), fmt.Appendf(nil, "v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	fail = true
	if err := s.Compact(s.Rev() - 1); err == nil {
		t.Fatal("Compact with its deletions failing: no error")
	}
	fail = false
	if len(log.error) != 1 || !strings.Contains(log.error[0], "injected fault") {
		t.Errorf("error lines after a failed compaction: %q, want one with its cause", log.error)
	}
	if err := s.Compact(s.Rev()); err != nil {
		t.Fatal(err)
	}
	// The failed compaction's deletions (3 puts) are finished first, then
	// the second compaction's (1 put).
	want := []string{
		fmt.Sprintf("finished scheduled compaction at revision %d: revisions deleted 3,", s.Rev()-1),
		fmt.Sprintf("finished scheduled compaction at revision %d: revisions deleted 1,", s.Rev()),
	}
	if len(log.info) != len(want) {
		t.Fatalf("info lines %q, want %d", log.info, len(want))
	}
	for i, w := range want {
		if !strings.Contains(log.info[i], w) {
			t.Errorf("info line %d = %q, want it to say %q", i, log.info[i], w)
		}
	}
}
