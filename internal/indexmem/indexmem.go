// Package indexmem measures the memory of the mvcc key index the way etcd's
// storage memory benchmark does, and fits etcd's model of it:
//
//	bytes = N*(c1 + key_size) + N*versions*c2
//
// where c2 includes the size of a version's pointer. It backs `tune memory`;
// the command only binds flags and prints.
//
//	row, err := indexmem.RunRowInChild(ctx, indexmem.Request{Keys: 1e6, Versions: 5, KeySize: 64})
//	c1, c2 := indexmem.Fit(rows)             // live heap
//	t1, t2 := indexmem.FitTotalAlloc(rows)   // TotalAlloc, as etcd measured
//
// # Method
//
// One row builds one index: N distinct keys of exactly key_size bytes, each
// its own []byte allocated inside the measurement (so it counts as index
// memory when the index keeps it), then versions passes that put every key
// once in the same order (round-robin), the main revision a global
// counter. Two numbers are taken: the TotalAlloc delta over the build
// (etcd's method; it includes garbage) and the HeapAlloc delta after two
// runtime.GC() calls (live memory). Before the live reading the harness
// drops its own references to the keys, so key bytes count only as far as
// the index keeps them: an index that holds the caller's []byte (etcd's)
// counts them, ours copies keys into an arena and counts that copy. In
// TotalAlloc our rows therefore count key bytes twice.
//
// Each row should run in a fresh process, so that one row's heap does not
// shape the next: RunRowInChild re-executes the current binary, which must
// call ChildMain first thing in main (or TestMain).
//
// A second kind of row (Request.ValueSize > 0) measures a whole store: an
// mvcc.Store on an on-disk engine with values of that size, and the
// process's resident set (VmRSS of /proc/self/status), as etcd's "overall
// memory usage" table does.
package indexmem

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"time"

	"github.com/google/btree"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Index kinds a row can measure.
const (
	// KindKeyIndex is mvcc's index (package keyindex).
	KindKeyIndex = "keyindex"
	// KindPlain is the baseline the issue describes: a google/btree of
	// pointers to {key []byte, revs []int64}.
	KindPlain = "plain"
)

// Request describes one row.
type Request struct {
	// Kind is the index measured: KindKeyIndex (the default) or KindPlain.
	// Ignored for a store row.
	Kind string `json:"kind,omitempty"`
	// Keys is the number of distinct keys, N.
	Keys int `json:"keys"`
	// Versions is the number of versions of each key.
	Versions int `json:"versions"`
	// KeySize is the length of every key in bytes, at least 8.
	KeySize int `json:"key_size"`
	// ValueSize, if > 0, makes this a store row: values of this size are
	// written to an mvcc.Store on disk and the process RSS is measured.
	ValueSize int `json:"value_size,omitempty"`
	// Dir is the directory of a store row's database; it must not exist
	// or be empty.
	Dir string `json:"dir,omitempty"`
	// MemtableSizeMB and BlockCacheSizeMB set a store row's engine; 0
	// means the config defaults.
	MemtableSizeMB   int64 `json:"memtable_size_mb,omitempty"`
	BlockCacheSizeMB int64 `json:"block_cache_size_mb,omitempty"`
}

// Row is one measured row.
type Row struct {
	Kind      string `json:"kind"`
	Keys      int    `json:"keys"`
	Versions  int    `json:"versions"`
	KeySize   int    `json:"key_size"`
	ValueSize int    `json:"value_size,omitempty"`
	// TotalAllocBytes is the TotalAlloc delta over the build.
	TotalAllocBytes int64 `json:"total_alloc_bytes"`
	// LiveHeapBytes is the HeapAlloc delta after two runtime.GC().
	LiveHeapBytes int64 `json:"live_heap_bytes"`
	// RSSBytes is the process's VmRSS after a store row's build.
	RSSBytes int64 `json:"rss_bytes,omitempty"`
	// BuildSeconds is the wall time of the build.
	BuildSeconds float64 `json:"build_seconds"`
}

// SeedIndexRows are the index rows of etcd's table: N 100K and 1M,
// versions 1 and 5, keys of 64 and 256 bytes.
func SeedIndexRows() []Request {
	var out []Request
	for _, k := range []int{64, 256} {
		for _, n := range []int{100_000, 1_000_000} {
			for _, v := range []int{1, 5} {
				out = append(out, Request{Kind: KindKeyIndex, Keys: n, Versions: v, KeySize: k})
			}
		}
	}
	return out
}

// SeedStoreRows are the rows of etcd's overall memory table: 64-byte keys,
// values of 256 bytes and 1 KiB. Dir must be set before running them.
func SeedStoreRows() []Request {
	var out []Request
	for _, vs := range []int{256, 1024} {
		for _, n := range []int{100_000, 1_000_000} {
			for _, v := range []int{1, 5} {
				out = append(out, Request{Keys: n, Versions: v, KeySize: 64, ValueSize: vs})
			}
		}
	}
	return out
}

func (r *Request) validate() error {
	var errs []error
	if r.Keys < 1 {
		errs = append(errs, fmt.Errorf("indexmem: keys = %d: must be >= 1", r.Keys))
	}
	if r.Versions < 1 {
		errs = append(errs, fmt.Errorf("indexmem: versions = %d: must be >= 1", r.Versions))
	}
	if r.KeySize < 8 || r.KeySize > keyindex.MaxKeySize {
		errs = append(errs, fmt.Errorf("indexmem: key_size = %d: must be in [8, %d] so that keys are distinct", r.KeySize, keyindex.MaxKeySize))
	}
	if r.ValueSize < 0 {
		errs = append(errs, fmt.Errorf("indexmem: value_size = %d: must be >= 0", r.ValueSize))
	}
	if r.ValueSize > 0 && r.Dir == "" {
		errs = append(errs, errors.New("indexmem: dir is empty: a store row needs a database directory"))
	}
	switch r.Kind {
	case "", KindKeyIndex, KindPlain:
	default:
		errs = append(errs, fmt.Errorf("indexmem: kind = %q: must be %q or %q", r.Kind, KindKeyIndex, KindPlain))
	}
	return errors.Join(errs...)
}

// Measure runs one row in this process (see RunRowInChild for a fresh
// one).
func Measure(req Request) (Row, error) {
	if err := req.validate(); err != nil {
		return Row{}, err
	}
	if req.ValueSize > 0 {
		return measureStore(req)
	}
	if req.Kind == "" {
		req.Kind = KindKeyIndex
	}
	return measureIndex(req)
}

// MeasureIndex measures mvcc's index for keys keys of keySize bytes with
// versions versions each, in this process. Prefer a fresh process per row
// (RunRowInChild).
func MeasureIndex(keys, versions, keySize int) (Row, error) {
	return Measure(Request{Kind: KindKeyIndex, Keys: keys, Versions: versions, KeySize: keySize})
}

// keyGen makes distinct keys: the first 8 bytes are a bijective scramble
// of the key's number (so keys are distinct and arrive in random order),
// the rest pseudo-random.
type keyGen struct{ r *rand.Rand }

func (g keyGen) key(i, size int) []byte {
	b := make([]byte, size)
	x := uint64(i)*0x9E3779B97F4A7C15 + 0x7F4A7C159E3779B9
	binary.BigEndian.PutUint64(b, x)
	for j := 8; j < size; j++ {
		if (j-8)%8 == 0 {
			x = g.r.Uint64()
		}
		b[j] = byte(x >> (8 * ((j - 8) % 8)))
	}
	return b
}

// indexUnderTest is what a row builds.
type indexUnderTest interface {
	put(key []byte, rev int64) error
}

type ourIndex struct{ ix *keyindex.Index }

func (o ourIndex) put(key []byte, rev int64) error {
	return o.ix.Put(key, keyindex.Revision{Main: rev})
}

// plainItem is the baseline's per-key object.
type plainItem struct {
	key  []byte
	revs []int64
}

type plainIndex struct {
	tree  *btree.BTreeG[*plainItem]
	probe plainItem
}

func newPlainIndex() *plainIndex {
	return &plainIndex{tree: btree.NewG(32, func(a, b *plainItem) bool { return bytes.Compare(a.key, b.key) < 0 })}
}

func (p *plainIndex) put(key []byte, rev int64) error {
	p.probe.key = key
	if it, ok := p.tree.Get(&p.probe); ok {
		it.revs = append(it.revs, rev)
		return nil
	}
	p.tree.ReplaceOrInsert(&plainItem{key: key, revs: []int64{rev}})
	return nil
}

func measureIndex(req Request) (Row, error) {
	g := keyGen{rand.New(rand.NewPCG(uint64(req.Keys), uint64(req.KeySize)))}
	keys := make([][]byte, req.Keys) // harness scaffolding, allocated before the window
	w := openHeapWindow()
	for i := range keys {
		keys[i] = g.key(i, req.KeySize)
	}
	var ix indexUnderTest
	if req.Kind == KindPlain {
		ix = newPlainIndex()
	} else {
		ix = ourIndex{keyindex.New()}
	}
	rev := int64(0)
	for range req.Versions {
		for _, k := range keys {
			rev++
			if err := ix.put(k, rev); err != nil {
				return Row{}, err
			}
		}
	}
	row := Row{Kind: req.Kind, Keys: req.Keys, Versions: req.Versions, KeySize: req.KeySize}
	w.close(keys, &row)
	runtime.KeepAlive(ix)
	return row, nil
}

// heapWindow measures the Go heap over one build: the TotalAlloc delta
// over it (etcd's method) and the live heap after it, each reading taken
// after two collections.
type heapWindow struct {
	before runtime.MemStats
	start  time.Time
}

func openHeapWindow() *heapWindow {
	w := &heapWindow{}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&w.before)
	w.start = time.Now()
	return w
}

// close ends the build and fills row's heap figures and build time. It
// drops the harness's keys first, so that key bytes count only as far as
// the index keeps them.
func (w *heapWindow) close(keys [][]byte, row *Row) {
	var built, after runtime.MemStats
	elapsed := time.Since(w.start)
	runtime.ReadMemStats(&built)
	clear(keys)
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keys)
	row.TotalAllocBytes = int64(built.TotalAlloc - w.before.TotalAlloc)
	row.LiveHeapBytes = int64(after.HeapAlloc) - int64(w.before.HeapAlloc)
	row.BuildSeconds = elapsed.Seconds()
}

// Fit fits c1 and c2 of bytes = N*(c1 + key_size) + N*versions*c2 to the
// rows' live heap by least squares.
func Fit(rows []Row) (c1, c2 float64) {
	return FitBytes(rows, func(r Row) int64 { return r.LiveHeapBytes })
}

// FitTotalAlloc fits c1 and c2 to the rows' TotalAlloc deltas.
func FitTotalAlloc(rows []Row) (c1, c2 float64) {
	return FitBytes(rows, func(r Row) int64 { return r.TotalAllocBytes })
}

// FitBytes fits c1 and c2 to the bytes that measure picks from each row,
// by ordinary least squares on y = bytes - N*key_size = c1*N + c2*N*V. It
// returns zeros if the rows do not determine both (fewer than two distinct
// versions counts).
func FitBytes(rows []Row, measure func(Row) int64) (c1, c2 float64) {
	var a11, a12, a22, b1, b2 float64
	for _, r := range rows {
		n, v := float64(r.Keys), float64(r.Versions)
		y := float64(measure(r)) - n*float64(r.KeySize)
		x1, x2 := n, n*v
		a11 += x1 * x1
		a12 += x1 * x2
		a22 += x2 * x2
		b1 += x1 * y
		b2 += x2 * y
	}
	det := a11*a22 - a12*a12
	if det == 0 || det < 1e-9*a11*a22 {
		return 0, 0
	}
	return (b1*a22 - b2*a12) / det, (a11*b2 - a12*b1) / det
}

// childEnv carries a Request to a child process.
const childEnv = "STRATA_MEMTABLE_ROW"

// RunRowInChild measures one row in a fresh process: it re-executes
// os.Args[0] with the request in the environment and reads the row the
// child prints. The binary must call ChildMain first thing. stderr, if not
// nil, receives the child's standard error.
func RunRowInChild(ctx context.Context, req Request, stderr io.Writer) (Row, error) {
	if err := req.validate(); err != nil {
		return Row{}, err
	}
	enc, err := json.Marshal(req)
	if err != nil {
		return Row{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(enc))
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return Row{}, fmt.Errorf("indexmem: child for %s: %w", enc, err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	var row Row
	if err := json.Unmarshal(lines[len(lines)-1], &row); err != nil {
		return Row{}, fmt.Errorf("indexmem: child for %s printed %q: %w", enc, out, err)
	}
	return row, nil
}

// ChildMain runs the row that RunRowInChild asked for, if this process is
// such a child: it prints the row as one JSON line to w and returns true,
// and the caller should exit (with status 1 if err != nil). In any other
// process it returns false at once. Call it first thing in main, or in
// TestMain for a test binary.
func ChildMain(w io.Writer) (bool, error) {
	enc, ok := os.LookupEnv(childEnv)
	if !ok {
		return false, nil
	}
	var req Request
	if err := json.Unmarshal([]byte(enc), &req); err != nil {
		return true, fmt.Errorf("indexmem: %s = %q: %w", childEnv, enc, err)
	}
	row, err := Measure(req)
	if err != nil {
		return true, err
	}
	out, err := json.Marshal(row)
	if err != nil {
		return true, err
	}
	_, err = fmt.Fprintf(w, "%s\n", out)
	return true, err
}
