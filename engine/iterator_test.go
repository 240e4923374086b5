package engine

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/damage"
)

// damageBlobFile writes values of 4000 bytes to a new database at
// cfg.DBPath, every one kept in a blob file, and flips 64 bytes in the
// middle of the one blob file the flush wrote (its length unchanged). It
// returns the keys written and the blob file's name (its number).
func damageBlobFile(t *testing.T, cfg *config.Config) (keys [][]byte, file string) {
	t.Helper()
	cfg.EnableBlobFiles = true
	cfg.MinBlobSize = 1024
	db := mustOpen(t, cfg)
	for i := range 300 {
		k := fmt.Appendf(nil, "key/%06d", i)
		if err := db.Put(k, doc(i, 4000)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(cfg.DBPath, "*.blob"))
	if len(blobs) != 1 {
		t.Fatalf("blob files: %v, want one", blobs)
	}
	damaged := damage.LargestFile(t, cfg.DBPath, "blob")
	return keys, strings.TrimSuffix(filepath.Base(damaged), ".blob")
}

// TestIteratorValueAndErrDamagedBlobFile reads values kept in a damaged
// blob file through an Iterator: the value in the damaged block fails
// with an error that errors.Is finds ErrCorruption in and that names the
// blob file, OnCorruption is told of it, the iterator stops there with
// the same error from Error, and every value before it reads whole.
// Pebble's own Value would hand back nil for the damaged value, which a
// reader takes for an empty value.
func TestIteratorValueAndErrDamagedBlobFile(t *testing.T) {
	cfg := testConfig(t)
	keys, file := damageBlobFile(t, cfg)

	var mu sync.Mutex
	var seen []error
	db, err := Open(cfg, Options{OnCorruption: func(err error) {
		mu.Lock()
		seen = append(seen, err)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()

	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var verr error
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			if v != nil {
				t.Errorf("ValueAndErr at %s: %d bytes with the error, want nil", it.Key(), len(v))
			}
			verr = err
			break
		}
		if !bytes.Equal(it.Key(), keys[n]) || !bytes.Equal(v, doc(n, 4000)) {
			t.Fatalf("key %d: %s = %.20q..., want %s = %.20q...", n, it.Key(), v, keys[n], doc(n, 4000))
		}
		n++
	}
	if !errors.Is(verr, ErrCorruption) || !strings.Contains(verr.Error(), file) {
		t.Fatalf("ValueAndErr after %d of %d values: error %v, want ErrCorruption naming blob file %s", n, len(keys), verr, file)
	}
	if n == 0 {
		t.Fatalf("the first value failed: want the damage in the middle of the file")
	}
	t.Logf("%d values read, then: %v", n, verr)
	mu.Lock()
	if len(seen) == 0 || !errors.Is(seen[0], ErrCorruption) {
		t.Errorf("OnCorruption saw %v, want the corruption error", seen)
	}
	mu.Unlock()
	if it.Next() {
		t.Errorf("Next after a failed value fetch moved on, want the iterator exhausted")
	}
	if err := it.Error(); !errors.Is(err, ErrCorruption) {
		t.Errorf("Error after a failed value fetch: %v, want ErrCorruption", err)
	}
	_ = it.Close()

	// Value hides the error: nil, as for an empty value.
	it, err = db.NewIter(&IterOptions{LowerBound: keys[n]})
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() || !bytes.Equal(it.Key(), keys[n]) {
		t.Fatalf("First: not at %s", keys[n])
	}
	if v := it.Value(); v != nil {
		t.Errorf("Value at the damaged value: %d bytes, want nil", len(v))
	}
	if err := it.Error(); !errors.Is(err, ErrCorruption) {
		t.Errorf("Error after Value met the damage: %v, want ErrCorruption", err)
	}
	_ = it.Close()
}

// TestIteratorValueAndErrAfterClose: a value read after DB.Close fails
// with ErrClosed, not a nil value read as empty.
func TestIteratorValueAndErrAfterClose(t *testing.T) {
	db := mustOpen(t, testConfig(t))
	if err := db.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !it.First() {
		t.Fatal("First: no key")
	}
	if v, err := it.ValueAndErr(); err != nil || string(v) != "v" {
		t.Fatalf("ValueAndErr = %q, %v; want v", v, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if v, err := it.ValueAndErr(); !errors.Is(err, ErrClosed) || v != nil {
		t.Fatalf("ValueAndErr after DB.Close = %q, %v; want nil, ErrClosed", v, err)
	}
}
