package mvcc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/damage"
)

// TestDamagedBlobFile stores values large enough for blob files, damages
// the largest blob file (64 bytes flipped in its middle, its length
// unchanged) and reads the store again: every reader of record values
// that meets the damage (Range, HashKV, WriteSnapshot, Export, a watch's
// history) fails with an error errors.Is finds engine.ErrCorruption in,
// not ErrCorrupt's "record of 0 bytes" of a value read as empty, and
// engine.Options.OnCorruption is told; the keys in sound blocks read.
func TestDamagedBlobFile(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = t.TempDir()
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 64, 8
	cfg.EnableBlobFiles, cfg.MinBlobSize = true, 1024
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t, db, Options{})
	const n = 300
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		v := make([]byte, 4000) // incompressible: the record stays >= MinBlobSize
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		if _, err := s.Put(fmt.Appendf(nil, "key/%04d", i), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	damage.LargestFile(t, cfg.DBPath, "blob")

	var mu sync.Mutex
	seen := 0
	db, err = engine.Open(cfg, engine.Options{OnCorruption: func(error) {
		mu.Lock()
		seen++
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s = openStore(t, db, Options{})
	defer s.Close()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, engine.ErrCorruption) {
			t.Errorf("%s: %v, want engine.ErrCorruption", what, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if seen == 0 {
			t.Errorf("%s: OnCorruption not called", what)
		}
		seen = 0
	}

	_, err = s.Range([]byte("key/"), PrefixEnd([]byte("key/")), RangeOptions{})
	check("Range of every key", err)
	var sound, damaged int
	for i := range n {
		r, err := s.Range(fmt.Appendf(nil, "key/%04d", i), nil, RangeOptions{})
		switch {
		case err == nil && len(r.KVs) == 1 && len(r.KVs[0].Value) == 4000:
			sound++
		case errors.Is(err, engine.ErrCorruption):
			damaged++
		default:
			t.Fatalf("Range key/%04d: %v, %v", i, r.KVs, err)
		}
	}
	if sound == 0 || damaged == 0 {
		t.Fatalf("%d keys damaged, %d sound: want some of each", damaged, sound)
	}
	t.Logf("%d keys damaged, %d sound", damaged, sound)
	_, _, _, err = s.HashKV(0)
	check("HashKV", err)
	_, err = s.WriteSnapshot(io.Discard)
	check("WriteSnapshot", err)
	_, err = s.Export(func(Version) error { return nil })
	check("Export", err)
	w, err := s.Watch(context.Background(), []byte("key/"), PrefixEnd([]byte("key/")), 1)
	if err != nil {
		t.Fatal(err)
	}
	for range w.C {
	}
	check("watch history", w.Err())
}
