// Package workload makes deterministic, realistic test data for Strata's
// benchmarks and tools, and reads user data in JSON Lines.
//
// A Generator makes entity documents: JSON objects of a chosen size with ids,
// timestamps, an author, tags, numbers, a nested address and English text
// whose words follow a Zipf-like frequency, so that codecs compress them
// about as well as real text-heavy documents (on 32 KB blocks of 2 KB
// documents, zstd gives about 2.4x and Snappy 1.65x),
// not as well as repeated strings nor as badly as random bytes.
//
//	g := workload.New(1, 2048)
//	for i := range 10000 {
//		db.Set(workload.Key(i), g.Entity(i))
//	}
//
// Entity i is a pure function of the seed, the size and i, so any subset of
// entities can be regenerated in any order, by any number of goroutines.
//
// # Keys
//
// Every tool keys entity i as Key(i), "entity:%08d" of i. For a JSON Lines
// file, i is the line number counted from 0: the first line is entity:00000000.
// Error messages name lines counted from 1, as editors do ("line 1" is
// entity:00000000).
package workload
