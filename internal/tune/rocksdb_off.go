//go:build !rocksdb

package tune

import "github.com/stratadb/strata/config"

// rocksDBAvailable reports whether this build can measure RocksDB: only
// with -tags rocksdb (rocksdb.go, which needs librocksdb).
const rocksDBAvailable = false

func openRocksDB(*config.Config) (store, error) { return nil, errNoRocksDB }
