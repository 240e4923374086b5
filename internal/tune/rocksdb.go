//go:build rocksdb

package tune

// The RocksDB peer of `tune compression --rocksdb`: real RocksDB through its
// C API (Debian's librocksdb-dev), configured by the RocksDB OPTIONS file
// Strata writes for the same config, measured by the same code as Strata.
// Built only with -tags rocksdb, so that the module builds and vets on a
// machine without librocksdb.

/*
#cgo LDFLAGS: -lrocksdb
#include <stdlib.h>
#include <rocksdb/c.h>
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/stratadb/strata/config"
)

// rocksDBAvailable reports whether this build can measure RocksDB.
const rocksDBAvailable = true

// rocksOptionsFile is the name the config's OPTIONS text is written under in
// a directory of its own, where rocksdb_load_latest_options finds it.
const rocksOptionsFile = "OPTIONS-000001"

// rocksStore is RocksDB opened with the RocksDB OPTIONS file Strata writes
// for the run's config (config.Resolved.RocksDBOptions): the same codecs per
// level, memtable size and count, file and level sizes, bloom bits, block
// size and background jobs. The block cache is an LRU cache of the capacity
// of Strata's Pebble cache (config.CacheSplit.CapacityBytes: the block share
// plus the memtable budget Pebble reserves in it), since RocksDB keeps its
// memtables out of its block cache.
type rocksStore struct {
	db      *C.rocksdb_t
	dbOpts  *C.rocksdb_options_t
	cfNames **C.char
	cfOpts  **C.rocksdb_options_t
	nCF     C.size_t
	cf      *C.rocksdb_column_family_handle_t
	cache   *C.rocksdb_cache_t
	wo      *C.rocksdb_writeoptions_t
	ro      *C.rocksdb_readoptions_t
}

// rocksErr turns a RocksDB error string into an error (and frees it).
func rocksErr(what string, cerr *C.char) error {
	if cerr == nil {
		return nil
	}
	defer C.rocksdb_free(unsafe.Pointer(cerr))
	return fmt.Errorf("rocksdb: %s: %s", what, C.GoString(cerr))
}

func openRocksDB(cfg *config.Config) (store, error) {
	r, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	// The options file goes into a directory of its own, removed once
	// loaded: RocksDB writes its own OPTIONS files into db_path.
	optDir, err := os.MkdirTemp("", "strata-rocksdb-options")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(optDir)
	if err := os.WriteFile(filepath.Join(optDir, rocksOptionsFile), []byte(r.RocksDBOptions()), 0o644); err != nil {
		return nil, err
	}
	s := &rocksStore{cache: C.rocksdb_cache_create_lru(C.size_t(r.Cache.CapacityBytes))}
	cdir := C.CString(optDir)
	defer C.free(unsafe.Pointer(cdir))
	env := C.rocksdb_create_default_env()
	defer C.rocksdb_env_destroy(env)
	var cerr *C.char
	var cfOpts **C.rocksdb_options_t
	C.rocksdb_load_latest_options(cdir, env, C.bool(true), s.cache, &s.dbOpts, &s.nCF, &s.cfNames, &cfOpts, &cerr)
	if err := rocksErr("load the options Strata writes for the config", cerr); err != nil {
		C.rocksdb_cache_destroy(s.cache)
		return nil, err
	}
	s.cfOpts = cfOpts
	if s.nCF != 1 {
		s.free()
		return nil, fmt.Errorf("rocksdb: the options file has %d column families, want 1", s.nCF)
	}
	C.rocksdb_options_set_create_if_missing(s.dbOpts, 1)
	cpath := C.CString(cfg.DBPath)
	defer C.free(unsafe.Pointer(cpath))
	names := unsafe.Slice(s.cfNames, 1)
	opts := unsafe.Slice(cfOpts, 1)
	C.rocksdb_options_set_create_if_missing(opts[0], 1)
	hp := (**C.rocksdb_column_family_handle_t)(C.malloc(C.size_t(unsafe.Sizeof(uintptr(0)))))
	defer C.free(unsafe.Pointer(hp))
	s.db = C.rocksdb_open_column_families(s.dbOpts, cpath, 1, &names[0], &opts[0], hp, &cerr)
	if err := rocksErr("open "+cfg.DBPath, cerr); err != nil {
		s.free()
		return nil, err
	}
	s.cf = *hp
	s.wo = C.rocksdb_writeoptions_create()
	C.rocksdb_writeoptions_set_sync(s.wo, C.uchar(b2i(cfg.Sync)))
	C.rocksdb_writeoptions_disable_WAL(s.wo, C.int(b2i(!cfg.EnableWAL)))
	s.ro = C.rocksdb_readoptions_create()
	return s, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cbytes returns a C view of b for the duration of a call (cgo lets C read
// Go memory that holds no Go pointers while the call runs).
func cbytes(b []byte) (*C.char, C.size_t) {
	if len(b) == 0 {
		return nil, 0
	}
	return (*C.char)(unsafe.Pointer(&b[0])), C.size_t(len(b))
}

func (s *rocksStore) commit(keys, values [][]byte) error {
	b := C.rocksdb_writebatch_create()
	defer C.rocksdb_writebatch_destroy(b)
	for i := range keys {
		k, kn := cbytes(keys[i])
		v, vn := cbytes(values[i])
		C.rocksdb_writebatch_put(b, k, kn, v, vn)
	}
	var cerr *C.char
	C.rocksdb_write(s.db, s.wo, b, &cerr)
	return rocksErr("write", cerr)
}

func (s *rocksStore) flush() error {
	fo := C.rocksdb_flushoptions_create()
	defer C.rocksdb_flushoptions_destroy(fo)
	C.rocksdb_flushoptions_set_wait(fo, 1)
	var cerr *C.char
	C.rocksdb_flush(s.db, fo, &cerr)
	return rocksErr("flush", cerr)
}

// compact compacts the whole key space with
// bottommost_level_compaction = kForce, so every table is rewritten with
// its level's codec, as Strata's CompactAll leaves them.
func (s *rocksStore) compact(_, _ []byte) error {
	co := C.rocksdb_compactoptions_create()
	defer C.rocksdb_compactoptions_destroy(co)
	C.rocksdb_compactoptions_set_bottommost_level_compaction(co, 2) // kForce
	C.rocksdb_compact_range_opt(s.db, co, nil, 0, nil, 0)
	return nil
}

// get compares the value in place through a pinned slice, as the other
// stores do: no copy.
func (s *rocksStore) get(key, want []byte) error {
	k, kn := cbytes(key)
	var cerr *C.char
	p := C.rocksdb_get_pinned(s.db, s.ro, k, kn, &cerr)
	if err := rocksErr("get", cerr); err != nil {
		return err
	}
	if p == nil {
		return fmt.Errorf("%w: key %q is missing", errMismatch, key)
	}
	defer C.rocksdb_pinnableslice_destroy(p)
	var n C.size_t
	v := C.rocksdb_pinnableslice_value(p, &n)
	got := unsafe.Slice((*byte)(unsafe.Pointer(v)), int(n))
	if !bytes.Equal(got, want) {
		return mismatch(key, bytes.Clone(got), want)
	}
	return nil
}

func (s *rocksStore) getAbsent(key []byte) error {
	k, kn := cbytes(key)
	var cerr *C.char
	p := C.rocksdb_get_pinned(s.db, s.ro, k, kn, &cerr)
	if err := rocksErr("get", cerr); err != nil {
		return err
	}
	if p != nil {
		C.rocksdb_pinnableslice_destroy(p)
		return fmt.Errorf("%w: key %q was never written but is present", errMismatch, key)
	}
	return nil
}

func (s *rocksStore) scan(fn func(k, v []byte) error) error {
	it := C.rocksdb_create_iterator(s.db, s.ro)
	defer C.rocksdb_iter_destroy(it)
	for C.rocksdb_iter_seek_to_first(it); C.rocksdb_iter_valid(it) != 0; C.rocksdb_iter_next(it) {
		var kn, vn C.size_t
		k := C.rocksdb_iter_key(it, &kn)
		v := C.rocksdb_iter_value(it, &vn)
		if err := fn(unsafe.Slice((*byte)(unsafe.Pointer(k)), int(kn)), unsafe.Slice((*byte)(unsafe.Pointer(v)), int(vn))); err != nil {
			return err
		}
	}
	var cerr *C.char
	C.rocksdb_iter_get_error(it, &cerr)
	return rocksErr("scan", cerr)
}

// property returns a DB property's text.
func (s *rocksStore) property(name string) string {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	v := C.rocksdb_property_value(s.db, cname)
	if v == nil {
		return ""
	}
	defer C.rocksdb_free(unsafe.Pointer(v))
	return C.GoString(v)
}

// writeAmp is RocksDB's own W-Amp of the "Sum" row of rocksdb.stats's
// compaction table (bytes written to tables / bytes flushed from
// memtables); 0 when the table has no such row.
func (s *rocksStore) writeAmp() (float64, error) {
	return parseRocksSumWAmp(s.property("rocksdb.stats")), nil
}

// parseRocksSumWAmp reads the W-Amp column of the Sum row of RocksDB's
// compaction stats table.
func parseRocksSumWAmp(stats string) float64 {
	col := -1
	for _, line := range strings.Split(stats, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "Level" {
			for i, name := range f {
				if name == "W-Amp" {
					col = i
				}
			}
			continue
		}
		if f[0] == "Sum" && col >= 0 && col < len(f) {
			// The header's "Files" column is two fields ("1/0") in the
			// rows; its "Size" two ("10.2 MB"): shift by one.
			for _, c := range []int{col + 1, col} {
				if c < len(f) {
					if v, err := strconv.ParseFloat(f[c], 64); err == nil {
						return v
					}
				}
			}
		}
	}
	return 0
}

// tableCodecs is not known from the C API (table properties are C++ only).
func (s *rocksStore) tableCodecs() (map[string]int, error) { return map[string]int{}, nil }

func (s *rocksStore) levels() ([7]int, error) {
	var out [7]int
	for l := range out {
		v := s.property(fmt.Sprintf("rocksdb.num-files-at-level%d", l))
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return out, fmt.Errorf("rocksdb: num-files-at-level%d = %q: %w", l, v, err)
		}
		out[l] = n
	}
	return out, nil
}

func (s *rocksStore) close() error {
	if s.db == nil {
		return errors.New("rocksdb: closed twice")
	}
	C.rocksdb_writeoptions_destroy(s.wo)
	C.rocksdb_readoptions_destroy(s.ro)
	C.rocksdb_column_family_handle_destroy(s.cf)
	C.rocksdb_close(s.db)
	s.db = nil
	s.free()
	return nil
}

// free releases the options and the cache.
func (s *rocksStore) free() {
	if s.dbOpts != nil {
		C.rocksdb_load_latest_options_destroy(s.dbOpts, s.cfNames, s.cfOpts, s.nCF)
		s.dbOpts = nil
	}
	if s.cache != nil {
		C.rocksdb_cache_destroy(s.cache)
		s.cache = nil
	}
}
