package engine

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stratadb/strata/config"
)

// The benchmarks run each operation through Strata (impl=strata) and through
// raw Pebble opened with the identical options from pebbleOptions
// (impl=pebble), in the same process, so benchstat can compare the two:
//
//	go test ./engine -run '^$' -bench 'Put|Get|Scan' -count 6 > bench.txt
//	benchstat -col /impl bench.txt

// kv is the subset of operations both implementations run.
type kv interface {
	put(k, v []byte) error
	get(k []byte) error
	view(k []byte) error
	scan(fn func(k, v []byte)) error
	flush() error
	close() error
}

type strataKV struct{ db *DB }

func (s strataKV) put(k, v []byte) error { return s.db.Put(k, v) }
func (s strataKV) get(k []byte) error {
	_, err := s.db.Get(k)
	return err
}
func (s strataKV) view(k []byte) error {
	return s.db.View(k, func([]byte) error { return nil })
}
func (s strataKV) scan(fn func(k, v []byte)) error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		fn(it.Key(), it.Value())
	}
	return it.Close()
}
func (s strataKV) flush() error { return s.db.Flush() }
func (s strataKV) close() error { return s.db.Close() }

type pebbleKV struct {
	db *pebble.DB
	wo *pebble.WriteOptions
}

func (p pebbleKV) put(k, v []byte) error { return p.db.Set(k, v, p.wo) }
func (p pebbleKV) get(k []byte) error {
	v, closer, err := p.db.Get(k)
	if err != nil {
		return err
	}
	_ = append([]byte(nil), v...) // Strata returns a copy; so does this side
	return closer.Close()
}
func (p pebbleKV) view(k []byte) error {
	_, closer, err := p.db.Get(k)
	if err != nil {
		return err
	}
	return closer.Close()
}
func (p pebbleKV) scan(fn func(k, v []byte)) error {
	it, err := p.db.NewIter(nil)
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		fn(it.Key(), it.Value())
	}
	return it.Close()
}
func (p pebbleKV) flush() error { return p.db.Flush() }
func (p pebbleKV) close() error { return p.db.Close() }

func benchConfig(b *testing.B) *config.Config {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(b.TempDir(), "db")
	cfg.BlockCacheSizeMB = 64
	cfg.MemtableSizeMB = 64
	return cfg
}

func openImpl(b *testing.B, impl string, cfg *config.Config) kv {
	b.Helper()
	switch impl {
	case "strata":
		db, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		return strataKV{db}
	default:
		opts, err := pebbleOptions(cfg)
		if err != nil {
			b.Fatal(err)
		}
		opts.WithFSDefaults()
		db, err := pebble.Open(cfg.DBPath, opts)
		opts.Cache.Unref()
		if err != nil {
			b.Fatal(err)
		}
		wo := pebble.NoSync
		if cfg.Sync {
			wo = pebble.Sync
		}
		return pebbleKV{db, wo}
	}
}

// runs counts benchmark invocations; implOrder alternates which
// implementation runs first on each, since the first of a pair measurably
// pays for the warm-up (with -count 6 each goes first three times).
var runs int

func implOrder() []string {
	runs++
	if runs%2 == 0 {
		return []string{"pebble", "strata"}
	}
	return []string{"strata", "pebble"}
}

const benchValueSize = 1024

func BenchmarkPut(b *testing.B) {
	for _, impl := range implOrder() {
		b.Run("impl="+impl, func(b *testing.B) {
			db := openImpl(b, impl, benchConfig(b))
			defer db.close()
			value := doc(1, benchValueSize)
			b.SetBytes(int64(len(value) + 14))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := db.put(key(i), value); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// loaded opens impl with n keys written and flushed to a table.
func loaded(b *testing.B, impl string, n int) kv {
	db := openImpl(b, impl, benchConfig(b))
	for i := range n {
		if err := db.put(key(i), doc(i, benchValueSize)); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.flush(); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkGet reads with a copy on both sides (engine.DB.Get against
// pebble.DB.Get plus a copy of the value).
func BenchmarkGet(b *testing.B) { benchmarkRead(b, kv.get) }

// BenchmarkView reads without copying on either side (engine.DB.View
// against pebble.DB.Get used before its closer).
func BenchmarkView(b *testing.B) { benchmarkRead(b, kv.view) }

func benchmarkRead(b *testing.B, read func(db kv, k []byte) error) {
	const n = 20000
	for _, impl := range implOrder() {
		b.Run("impl="+impl, func(b *testing.B) {
			db := loaded(b, impl, n)
			defer db.close()
			b.SetBytes(benchValueSize)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := read(db, key((i*7919)%n)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

func BenchmarkScan(b *testing.B) {
	const n = 20000
	for _, impl := range implOrder() {
		b.Run(fmt.Sprintf("impl=%s", impl), func(b *testing.B) {
			db := loaded(b, impl, n)
			defer db.close()
			var bytes int64
			_ = db.scan(func(k, v []byte) { bytes += int64(len(k) + len(v)) })
			b.SetBytes(bytes)
			b.ReportAllocs()
			for b.Loop() {
				if err := db.scan(func(k, v []byte) {}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
