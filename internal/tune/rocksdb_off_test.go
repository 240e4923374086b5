//go:build !rocksdb

package tune

import (
	"context"
	"errors"
	"testing"
)

// TestCompressionRocksDBNeedsTheTag: without -tags rocksdb a RocksDB run
// fails with the error that says how to build one.
func TestCompressionRocksDBNeedsTheTag(t *testing.T) {
	profiles, _ := ParseProfiles("none/none")
	_, err := RunCompression(context.Background(), CompressionOptions{MinTime: testMinTime, Data: smallData(t), Profiles: profiles, RocksDB: true})
	if !errors.Is(err, errNoRocksDB) {
		t.Fatalf("got %v, want %v", err, errNoRocksDB)
	}
}
