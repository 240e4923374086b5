package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestBackupRestore writes a backup of a store with history and a
// compaction, checks it and restores it into an empty store: the same
// revision, the same keys and values at the latest and at an older
// revision. A flipped byte or a cut-off end is refused before anything is
// restored.
func TestBackupRestore(t *testing.T) {
	src, _ := newMemStore(t, Options{})
	for i := range 50 {
		if _, err := src.Put([]byte(fmt.Sprintf("k%02d", i%20)), []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Compact(10); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := src.WriteBackup(&b); err != nil {
		t.Fatal(err)
	}
	backup := b.Bytes()
	if len(backup)%512 != 32 {
		t.Errorf("a backup of %d bytes: etcdctl wants a multiple of 512 plus the 32-byte SHA-256", len(backup))
	}

	flipped := bytes.Clone(backup)
	flipped[len(flipped)/2] ^= 1
	for name, bad := range map[string][]byte{"a flipped byte": flipped, "a cut-off end": backup[:len(backup)-1], "empty": nil} {
		if _, err := CheckBackup(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrBackupChecksum) {
			t.Errorf("%s: CheckBackup = %v, want ErrBackupChecksum", name, err)
		}
	}

	snap, err := CheckBackup(bytes.NewReader(backup), int64(len(backup)))
	if err != nil {
		t.Fatal(err)
	}
	dst, _ := newMemStore(t, Options{})
	if err := dst.RestoreSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	if dst.Rev() != src.Rev() {
		t.Fatalf("restored revision %d, want %d", dst.Rev(), src.Rev())
	}
	for _, rev := range []int64{0, 30} {
		want, err := src.Range([]byte("k"), []byte("l"), RangeOptions{Rev: rev})
		if err != nil {
			t.Fatal(err)
		}
		got, err := dst.Range([]byte("k"), []byte("l"), RangeOptions{Rev: rev})
		if err != nil {
			t.Fatal(err)
		}
		if !sameKVs(got.KVs, want.KVs) {
			t.Errorf("at revision %d: restored %s, want %s", rev, fmtKVs(got.KVs), fmtKVs(want.KVs))
		}
	}
	if _, err := dst.Range([]byte("k"), []byte("l"), RangeOptions{Rev: 5}); !errors.Is(err, ErrCompacted) {
		t.Errorf("below the compaction: %v, want ErrCompacted", err)
	}
}
