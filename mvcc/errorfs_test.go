package mvcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestCompactionWriteErrorSweep fails the k-th file system write during a
// compaction, for k = 0, 1, ... until one succeeds (Pebble's TestErrors
// sweep). Pebble treats a failed WAL write as fatal: the commit calls
// Logger.Fatalf, which the engine turns into a panic, so the failure is a
// crash at exactly that write. The crash clone taken then must reopen
// consistent, with the compaction finished or never begun. (The engine and
// store of a panicked iteration are abandoned, not closed: Pebble is
// unusable after a fatal error.)
func TestCompactionWriteErrorSweep(t *testing.T) {
	seed := testSeed(t)
	for k := int64(0); ; k++ {
		r := rand.New(rand.NewPCG(seed, 5))
		mem := vfs.NewCrashableMem()
		var armed atomic.Bool
		var writes atomic.Int64
		inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if !armed.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
				return nil
			}
			if writes.Add(1)-1 == k {
				return errorfs.ErrInjected
			}
			return nil
		})
		db := openEngine(t, errorfs.Wrap(mem, inj), true)
		s := openStore(t, db, Options{})
		m := newModel()
		g := newOpGen(r, 10)
		for range 60 {
			g.step(t, s, m, 0)
		}
		target := m.rev - 3
		armed.Store(true)
		var panicked any
		err := func() error {
			defer func() { panicked = recover() }()
			return s.Compact(target)
		}()
		armed.Store(false)
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		if panicked == nil {
			_ = s.Close()
			_ = db.Close()
		}
		switch {
		case panicked != nil:
			if !strings.Contains(fmt.Sprint(panicked), errorfs.ErrInjected.Error()) {
				t.Fatalf("k=%d: Compact panicked with %v", k, panicked)
			}
		case err == nil:
			if k < 3 {
				t.Fatalf("the compaction wrote only %d times", k)
			}
			t.Logf("failed each of the %d writes of a compaction", k)
			return
		case !errors.Is(err, errorfs.ErrInjected):
			t.Fatalf("k=%d: Compact: %v, want the injected error", k, err)
		}
		db2 := openEngine(t, crashed, true)
		s2 := openStore(t, db2, Options{})
		got := s2.CompactRev()
		if got != 0 && got != target {
			t.Fatalf("k=%d: reopened compacted at %d, want 0 or %d", k, got, target)
		}
		m.compacted = got
		checkAgainstModel(t, s2, m, fmt.Sprintf("k=%d reopened", k))
		checkCompactionFinished(t, s2, db2)
		_ = s2.Close()
		_ = db2.Close()
	}
}
