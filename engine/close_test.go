package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCloseBesideOperations closes the database while goroutines put, get,
// iterate, snapshot, commit batches, read metrics and compact. Each call
// must succeed or return ErrClosed (never panic on a closed Pebble), Close
// must wait for the writes in flight, and after reopening every write that
// was acknowledged is present.
func TestCloseBesideOperations(t *testing.T) {
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		cfg := testConfig(t)
		db := mustOpen(t, cfg)
		var acked sync.Map // key -> value of acknowledged writes
		var wg sync.WaitGroup
		var calls atomic.Int64
		var perOp sync.Map
		fail := func(what string, err error) bool {
			if err == nil {
				calls.Add(1)
				c, _ := perOp.LoadOrStore(what, new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
				return false
			}
			if !errors.Is(err, ErrClosed) {
				t.Errorf("round %d: %s: %v, want nil or ErrClosed", round, what, err)
			}
			return true
		}
		worker := func(name string, op func(i int) error) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					if fail(name, op(i)) {
						return
					}
				}
			}()
		}
		for w := range 2 {
			worker("Put", func(i int) error {
				k, v := fmt.Appendf(nil, "put/%d/%08d", w, i), fmt.Appendf(nil, "v%d", i)
				err := db.Put(k, v)
				if err == nil {
					acked.Store(string(k), v)
				}
				return err
			})
		}
		worker("Batch", func(i int) error {
			b := db.NewBatch()
			defer b.Close()
			k := fmt.Appendf(nil, "batch/%08d", i)
			if err := b.Put(k, k); err != nil {
				return err
			}
			err := b.Commit()
			if err == nil {
				acked.Store(string(k), k)
			}
			return err
		})
		worker("Get", func(i int) error {
			_, err := db.Get(fmt.Appendf(nil, "put/0/%08d", i/2))
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		})
		worker("Iterator", func(int) error {
			it, err := db.NewIter(nil)
			if err != nil {
				return err
			}
			for n := 0; n < 100 && it.Next(); n++ {
				_ = it.Key()
			}
			if err := it.Error(); err != nil {
				_ = it.Close()
				return err
			}
			return it.Close()
		})
		worker("Snapshot", func(i int) error {
			s, err := db.NewSnapshot()
			if err != nil {
				return err
			}
			if _, err := s.Get([]byte("put/0/00000001")); err != nil && !errors.Is(err, ErrNotFound) {
				_ = s.Close()
				return err
			}
			return s.Close()
		})
		worker("Metrics", func(int) error { _, err := db.Metrics(); return err })
		worker("CompactAll", func(int) error { return db.CompactAll() })

		time.Sleep(time.Duration(50+50*round) * time.Millisecond)
		if err := db.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		if err := db.Put([]byte("after"), []byte("close")); !errors.Is(err, ErrClosed) {
			t.Errorf("Put after Close = %v, want ErrClosed", err)
		}
		wg.Wait()
		if calls.Load() == 0 {
			t.Fatal("no call succeeded before Close: the test raced nothing")
		}

		db = mustOpen(t, cfg)
		n := 0
		acked.Range(func(k, v any) bool {
			got, err := db.Get([]byte(k.(string)))
			if err != nil || !bytes.Equal(got, v.([]byte)) {
				t.Errorf("round %d: acknowledged write %s lost after Close: %v", round, k, err)
				return false
			}
			n++
			return true
		})
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		var ops []string
		perOp.Range(func(k, v any) bool { ops = append(ops, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load())); return true })
		t.Logf("round %d: %d calls before Close (%v), %d acknowledged writes present after reopening", round, calls.Load(), ops, n)
	}
}
