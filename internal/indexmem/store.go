package indexmem

import (
	"math/rand/v2"
	"os"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/procfs"
	"github.com/stratadb/strata/mvcc"
)

// measureStore builds a whole store, as etcd's overall memory table: N keys
// times versions Puts of ValueSize-byte values, round-robin, into an
// mvcc.Store on an on-disk engine with sync off, then reads the process's
// resident set. Values go to disk; what stays resident is the index, the
// engine's memtables and block cache, and the Go runtime.
func measureStore(req Request) (Row, error) {
	cfg := config.Default()
	cfg.DBPath = req.Dir
	if req.MemtableSizeMB > 0 {
		cfg.MemtableSizeMB = req.MemtableSizeMB
	}
	if req.BlockCacheSizeMB > 0 {
		cfg.BlockCacheSizeMB = req.BlockCacheSizeMB
	}
	db, err := engine.Open(cfg)
	if err != nil {
		return Row{}, err
	}
	defer db.Close()
	s, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		return Row{}, err
	}
	defer s.Close()

	g := keyGen{rand.New(rand.NewPCG(uint64(req.Keys), uint64(req.KeySize)))}
	keys := make([][]byte, req.Keys)
	value := make([]byte, req.ValueSize)
	vr := rand.New(rand.NewPCG(1, 2))
	w := openHeapWindow()
	for i := range keys {
		keys[i] = g.key(i, req.KeySize)
	}
	for range req.Versions {
		for _, k := range keys {
			for j := 0; j+8 <= len(value); j += 8 {
				v := vr.Uint64()
				for b := range 8 {
					value[j+b] = byte(v >> (8 * b))
				}
			}
			if _, err := s.Put(k, value); err != nil {
				return Row{}, err
			}
		}
	}
	row := Row{Kind: "store", Keys: req.Keys, Versions: req.Versions, KeySize: req.KeySize, ValueSize: req.ValueSize}
	w.close(keys, &row)
	rss, _, err := procfs.RSS(os.Getpid())
	if err != nil {
		return Row{}, err
	}
	row.RSSBytes = rss
	return row, nil
}
