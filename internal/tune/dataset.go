package tune

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/stratadb/strata/internal/workload"
)

// Dataset is the data a measurement writes: entity i is Keys[i] =
// workload.Key(i) with the document Values[i]. Keys sort in index order.
type Dataset struct {
	// Keys and Values hold one entry per entity, in index order.
	Keys, Values [][]byte
	// Source describes where the data came from, for notes under tables
	// ("10000 generated entities of ~2048 bytes (seed 1)").
	Source string
	// origin says how to build the same data in another process (nil for
	// data built otherwise, such as a Sample).
	origin *dataOrigin
}

// GenerateDataset returns entities documents of about size bytes made by
// workload.New(seed, size): mixed JSON with natural-language text.
func GenerateDataset(entities, size int, seed int64) (*Dataset, error) {
	if entities < 1 {
		return nil, fmt.Errorf("--entities %d: must be >= 1", entities)
	}
	if size < 1 {
		return nil, fmt.Errorf("--size %d: must be >= 1", size)
	}
	g := workload.New(seed, size)
	d := &Dataset{
		Keys:   make([][]byte, entities),
		Values: make([][]byte, entities),
		Source: fmt.Sprintf("%d generated entities of ~%d bytes (seed %d)", entities, size, seed),
		origin: &dataOrigin{Entities: entities, Size: size, Seed: seed},
	}
	// Entity i is a pure function of (seed, size, i): generate in parallel.
	workers := min(runtime.GOMAXPROCS(0), entities)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < entities; i += workers {
				d.Keys[i] = workload.Key(i)
				d.Values[i] = g.Entity(i)
			}
		})
	}
	wg.Wait()
	return d, nil
}

// LoadDataset reads a JSON Lines file: line i (counted from 0) is the value
// of key workload.Key(i). A missing or empty file, or a line that is not
// JSON, is an error naming the file (and the line, counted from 1).
func LoadDataset(path string) (*Dataset, error) {
	values, err := workload.LoadJSONL(path)
	if err != nil {
		return nil, fmt.Errorf("--input: %w", err)
	}
	d := &Dataset{
		Keys:   make([][]byte, len(values)),
		Values: values,
	}
	for i := range values {
		d.Keys[i] = workload.Key(i)
	}
	d.Source = fmt.Sprintf("%d entities of %s (%.0f bytes on average)", len(values), path, float64(d.valueBytes())/float64(len(values)))
	if abs, err := filepath.Abs(path); err == nil {
		d.origin = &dataOrigin{Path: abs}
	}
	return d, nil
}

// Len returns the number of entities.
func (d *Dataset) Len() int { return len(d.Keys) }

// RawBytes returns the bytes of every key and value: the numerator of every
// ratio and throughput figure.
func (d *Dataset) RawBytes() int64 {
	var n int64
	for i := range d.Keys {
		n += int64(len(d.Keys[i]) + len(d.Values[i]))
	}
	return n
}

func (d *Dataset) valueBytes() int64 {
	var n int64
	for _, v := range d.Values {
		n += int64(len(v))
	}
	return n
}

// Sample returns n entities spread evenly over d (entity i*len/n for i <
// n), keeping their keys, or d itself when n >= d.Len() or n < 1.
func (d *Dataset) Sample(n int) *Dataset {
	if n < 1 || n >= d.Len() {
		return d
	}
	s := &Dataset{
		Keys:   make([][]byte, n),
		Values: make([][]byte, n),
		Source: fmt.Sprintf("a sample of %d of %s", n, d.Source),
	}
	for i := range n {
		j := int(int64(i) * int64(d.Len()) / int64(n))
		s.Keys[i], s.Values[i] = d.Keys[j], d.Values[j]
	}
	return s
}

// entries returns key+value of each entity, the bytes a table's data block
// holds, for cutting into blocks with rawcodec.SplitBlocks.
func (d *Dataset) entries() [][]byte {
	out := make([][]byte, d.Len())
	for i := range d.Keys {
		e := make([]byte, 0, len(d.Keys[i])+len(d.Values[i]))
		out[i] = append(append(e, d.Keys[i]...), d.Values[i]...)
	}
	return out
}

// readOrder returns a permutation of 0..n-1 that depends only on seed: the
// order in which every run reads the keys.
func readOrder(n int, seed int64) []int {
	r := rand.New(rand.NewPCG(uint64(seed), 0x7475_6e65)) // "tune"
	return r.Perm(n)
}

// scanOrder returns the entity indexes in key order, the order a forward
// scan returns them. workload.Key(i) sorts in index order below 10^8
// entities, so this is normally 0..n-1.
func (d *Dataset) scanOrder() []int {
	order := make([]int, d.Len())
	for i := range order {
		order[i] = i
	}
	if !slices.IsSortedFunc(d.Keys, bytes.Compare) {
		slices.SortFunc(order, func(a, b int) int { return bytes.Compare(d.Keys[a], d.Keys[b]) })
	}
	return order
}
