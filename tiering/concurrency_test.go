//go:build unix

package tiering

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadsAndWritesDuringMoves runs writers, readers, listings and extra
// mover passes while the background mover relocates most of the database
// (run it with -race).
func TestReadsAndWritesDuringMoves(t *testing.T) {
	template := makeTemplate(t)
	root := t.TempDir()
	copyTree(t, template, root)
	var moving atomic.Int64
	o := Options{MoverInterval: 20 * time.Millisecond, OnMove: func(mi MoveInfo) {
		if mi.Err == nil {
			moving.Add(1)
		}
	}}
	d := openTestDB(t, root, movedPaths, o)
	extra := map[bool]int{false: 3000, true: 1500}[raceEnabled]
	const minMoves = 5
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	var written atomic.Int64
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		for i := 0; i < extra; i += 100 {
			d.write(templateRecords+i, templateRecords+i+100, uint64(i))
			written.Store(int64(i + 100))
		}
	}()
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed uint64) { // readers of the template's records and the new ones
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for ctx.Err() == nil {
				i := rng.IntN(templateRecords)
				if w := written.Load(); w > 0 && rng.IntN(2) == 0 {
					i = templateRecords + rng.IntN(int(w))
				}
				v, closer, err := d.db.Get(key(i))
				if err != nil {
					errs <- err
					return
				}
				if string(v) != string(value(i, valueSize)) {
					closer.Close()
					errs <- errWrongValue(i)
					return
				}
				closer.Close()
			}
		}(uint64(r))
	}
	wg.Add(1)
	go func() { // iterators, listings, stats and passes of our own
		defer wg.Done()
		for ctx.Err() == nil {
			it, err := d.db.NewIter(nil)
			if err != nil {
				errs <- err
				return
			}
			n := 0
			for it.First(); it.Valid() && n < 500; it.Next() {
				n++
			}
			if err := it.Close(); err != nil {
				errs <- err
				return
			}
			if _, err := d.layout.FS().List(d.dbDir); err != nil {
				errs <- err
				return
			}
			_ = d.layout.Stats()
			_ = d.layout.Rebalance(ctx)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for (written.Load() < int64(extra) || moving.Load() < minMoves) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if moving.Load() < minMoves {
		t.Errorf("only %d moves during the run", moving.Load())
	}
	d.settle()
	t.Logf("%s", d.layout.Stats())
	checkConsistent(t, d.layout, d.db)
	checkPlacement(t, d.layout, d.db, 1<<20)
	verifyKeys(t, d.db, 0, templateRecords+extra)
	d.close()
}

type errWrongValue int

func (e errWrongValue) Error() string { return "wrong value for " + string(key(int(e))) }
