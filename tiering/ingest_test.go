//go:build unix

package tiering

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestIngestLandsWhereItsLevelBelongs ingests an external table: its level
// is unknown when Pebble links it in, so it lands in path 0, and the mover
// takes it where its level belongs.
func TestIngestLandsWhereItsLevelBelongs(t *testing.T) {
	root := t.TempDir()
	d := openTestDB(t, root, []Path{{"p0", 200 << 10}, {"p1", 1 << 30}}, Options{DisableMover: true})
	ext := filepath.Join(root, "ext.sst")
	f, err := vfs.Default.Create(ext, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: d.db.TableFormat()})
	for i := 0; i < 500; i++ {
		if err := w.Set(key(i), value(i, valueSize)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.db.Ingest(context.Background(), []string{ext}); err != nil {
		t.Fatal(err)
	}
	levels, err := d.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(levels[6]) != 1 {
		t.Fatalf("ingested table not in L6: %v", levels)
	}
	name := tableName(uint64(levels[6][0].BackingSSTNum))
	if loc, _ := d.layout.lookup(name); loc != 0 {
		t.Errorf("ingested %s linked into path %d, want 0", name, loc)
	}
	d.settle()
	if loc, _ := d.layout.lookup(name); loc != 1 {
		t.Errorf("after the mover, %s is in path %d, want 1 (plan %s)", name, loc, d.layout.Plan())
	}
	if st := d.layout.Stats(); st.MovedBytesByReason[MoveLevelChanged]+st.MovedBytesByReason[MovePlanChanged] == 0 {
		t.Errorf("no move recorded: %s", st)
	}
	checkConsistent(t, d.layout, d.db)
	verifyKeys(t, d.db, 0, 500)
	d.close()
}

// TestIngestFromTablePath writes the external table where TablePath says
// for L6: Pebble's ingestion hard-links it and it stays on that device, in
// L6's path, without a move.
func TestIngestFromTablePath(t *testing.T) {
	root := t.TempDir()
	d := openTestDB(t, root, []Path{{"p0", 200 << 10}, {"p1", 1 << 30}}, Options{DisableMover: true})
	ext := d.layout.TablePath(6, "strata-ingest-1.sst")
	if filepath.Dir(ext) != filepath.Join(root, "p1") {
		t.Fatalf("TablePath(6) = %s, want a name in p1 (plan %s)", ext, d.layout.Plan())
	}
	f, err := vfs.Default.Create(ext, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: d.db.TableFormat()})
	for i := 0; i < 500; i++ {
		if err := w.Set(key(i), value(i, valueSize)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.db.Ingest(context.Background(), []string{ext}); err != nil {
		t.Fatal(err)
	}
	_ = vfs.Default.Remove(ext) // Pebble removes the original after linking it
	levels, err := d.db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(levels[6]) != 1 {
		t.Fatalf("ingested table not in L6: %v", levels)
	}
	name := tableName(uint64(levels[6][0].BackingSSTNum))
	if loc, _ := d.layout.lookup(name); loc != 1 {
		t.Errorf("ingested %s linked into path %d, want 1", name, loc)
	}
	d.settle()
	if st := d.layout.Stats(); st.MovedFiles != 0 {
		t.Errorf("the ingested table was moved: %s", st)
	}
	checkConsistent(t, d.layout, d.db)
	verifyKeys(t, d.db, 0, 500)
	d.close()
}
