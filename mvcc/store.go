package mvcc

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc/keyindex"
)

// Options tune a Store. The zero value is valid.
type Options struct {
	// WatchBufferSize is the number of events a watcher buffers in memory
	// for a slow reader. Past it the watcher stops buffering and later
	// reads the events back from storage, so writers never wait for it and
	// its memory stays bounded; only if compaction drops those events first
	// does it end, with ErrCompacted. The default value is 1024.
	WatchBufferSize int
	// ReclaimHistory makes the store compact the engine over the history
	// each compaction drops, in the background, so that its space is given
	// back (see reclaim.go). Off in the zero Options, for an embedded store
	// whose history is small; strata serve turns it on
	// (server.reclaim_history): after a million pod updates and a last
	// compaction it kept 0.27x the disk, for the same CPU (docs/mvcc-compaction.md).
	ReclaimHistory bool
	// RawValues stores values as given. By default a value of 512 bytes
	// or more is compressed alone against a dictionary of recent values
	// (valuedict.go): Kubernetes objects take 0.6x the disk and are read
	// back faster.
	RawValues bool
	// Logger receives a line for each compaction finished or failed, as
	// etcd logs them; nil logs nothing.
	Logger engine.Logger
	// HashCompactions makes each compaction, once finished, hash the
	// store at its revision and keep the hash (the last 10, in memory):
	// HashKV at that revision answers it even after later compactions,
	// and CompactionHashes lists them, for etcd's compact hash check
	// (server.compact_hash_check). It costs a read of every version kept
	// at or below the revision per compaction. Off in the zero Options.
	HashCompactions bool

	// hooks are for tests.
	hooks hooks
}

// errInjected is what tests' hooks return: a write that certainly did not
// happen, unlike a failed commit.
var errInjected = errors.New("mvcc: injected fault")

// hooks let tests inject faults.
type hooks struct {
	// beforeCompactCommit, if set, runs before the commit of compaction
	// batch i (0 is the one that schedules it); an error aborts the
	// compaction with that error, as a failed write would.
	beforeCompactCommit func(i int) error
	// syncUnderLock makes each writer wait for its WAL sync while it
	// holds writeMu, as a store without group commit would: the peer of
	// the group commit benchmark.
	syncUnderLock bool
	// walkKeys, if not 0, replaces walkKeys, the keys a step of a
	// compaction's walk visits: small steps interleave with writers often.
	walkKeys int
	// inWalkStep, if set, runs at the end of each step of a compaction's
	// walk, under the locks the step holds.
	inWalkStep func()
	// compactSleep, if set, replaces time.Sleep for a background
	// compaction's rests (compactPace).
	compactSleep func(time.Duration)
	// noSpaceWait, if set, runs before each pause of a commit waiting for
	// the disk guard to accept it (commitAdmitted), under writeMu.
	noSpaceWait func()
	// beforeCommit, if set, runs before each engine commit of the write
	// path, under writeMu, after the write changed memory.
	beforeCommit func()
}

const (
	defaultWatchBufferSize = 1024
)

// validate reports every invalid field at once.
func (o *Options) validate() error {
	var errs []error
	if o.WatchBufferSize < 0 {
		errs = append(errs, fmt.Errorf("mvcc: WatchBufferSize = %d: must be >= 0 (0 means %d)", o.WatchBufferSize, defaultWatchBufferSize))
	}
	return errors.Join(errs...)
}

func (o *Options) ensureDefaults() {
	if o.WatchBufferSize == 0 {
		o.WatchBufferSize = defaultWatchBufferSize
	}
}

// Store is a revisioned key-value store on an engine.DB: etcd's mvcc
// store. It is safe for concurrent use: write transactions are ordered one
// at a time but share WAL syncs (see commit.go); reads run beside them and
// each other.
//
// # Locks
//
// Six mutexes, each named for what it guards, always taken in this order
// (a goroutine holding one takes only those after it):
//
//	compactMu  one compaction (or hash, snapshot restore, close) at a time
//	writeMu    orders writers: revision and index assignment, engine commit
//	pubMu      the queue of commits waiting for their WAL sync, publication
//	watchMu    the watchers and what they were sent
//	mu         the in-memory index and the published revision (readers share it)
//	leaseMu    the lease sets
//
// (hashMu, guarding the kept compaction hashes, is a leaf: nothing else is
// taken while it is held.)
//
// writeMu is held from the start of a write to its engine commit, and
// released before the WAL sync wait, so that the next writer commits
// while this one syncs (group commit, see commit.go). A Batch holds it
// across the commands it stages (from the first to Commit), since each is
// evaluated against the state the ones before leave; lease grants and
// revocations (lease.go) take it and release it in writeTxn.finish.
// Readers take mu shared only, so they never wait for a writer's sync.
// The store's failure is an atomic, read without a lock.
//
// Revisions are numbered as in etcd: an empty store is at revision 1 and
// its first write makes revision 2. (Stores written before this numbering
// keep theirs: their first write is revision 1, and new writes continue
// from their current revision. Revisions stay unique and increasing, which
// is all a client may rely on, so no rewrite is needed.)
type Store struct {
	db   *engine.DB
	opts Options

	// writeMu orders writers: under it a writer reads the latest state
	// (published or not), assigns its revision and log index, updates the
	// index and the lease sets, commits its batch to the engine without
	// waiting for the WAL sync, and queues it for publication.
	writeMu sync.Mutex
	// lastRev and lastIndex are the last revision and log index assigned
	// (>= rev and applied). Guarded by writeMu.
	lastRev   int64
	lastIndex uint64
	// leases are the granted leases and their keys, as of lastRev:
	// written under writeMu and leaseMu, read under either.
	leaseMu sync.Mutex
	leases  leaseSet
	// leaseHook is told of lease changes (OnLeaseChange); under leaseMu.
	leaseHook func(LeaseChange)

	// failed, once set, is returned by every write: an engine commit or
	// WAL sync failed, and whether it reached storage is unknown, so the
	// revision it used must not be reused. Reopen the store. Set once,
	// with no lock (see fail).
	failed atomic.Pointer[error]

	// mu guards the index and the published state below: readers hold it
	// shared, a writer exclusively while it changes the index (with
	// revisions above rev, which readers do not see) or publishes.
	mu sync.RWMutex
	ix *keyindex.Index
	// recs caches recent records by revision (see recordCache); it needs
	// no lock.
	recs recordCache
	// dicts are the dictionaries values are compressed against; see
	// valueDicts for its locking.
	dicts *valueDicts
	// counts knows the counts of the next pages of paginated Ranges (see
	// rangeCounts); it needs no lock.
	counts rangeCounts
	// rev is the current revision: the last one durable and published.
	rev int64
	// compactRev is the revision of the last compaction scheduled, -1 if
	// none; reads below it fail with ErrCompacted.
	compactRev int64
	// applied is the log index of the last Entry durable and published.
	applied uint64

	// pubMu guards queue, the batches committed and not yet published, in
	// revision order, and pubFailed, the first WAL sync failure.
	pubMu     sync.Mutex
	queue     []*pending
	pubFailed error

	// compactMu runs one compaction at a time; leftover holds the
	// deletions a compaction could not finish (see Compact).
	compactMu sync.Mutex
	leftover  *compactJob
	metrics   *compactionMetrics
	// hashMu guards hashes, the hashes of the last compactions
	// (Options.HashCompactions), in revision order. A leaf lock.
	hashMu sync.Mutex
	hashes []CompactionHash

	// watchMu guards the watchers (see watch.go): synced indexes those
	// that take live events by key, watchers holds them all.
	watchMu  sync.Mutex
	synced   watchGroup
	watchers watcherSet
	// notified is the last revision handed to watchers.
	notified int64
	// reclaim compacts the engine over the history compactions drop (nil
	// without Options.ReclaimHistory or on a read-only engine).
	reclaim *reclaimer

	// wg counts the goroutines of Store.Watch's watchers.
	wg sync.WaitGroup

	closed atomic.Bool
	// spaceWaitsAbandoned is set by AbandonSpaceWaits.
	spaceWaitsAbandoned atomic.Bool
	// rebuild is how long Open took to rebuild the index; origin is where
	// it came from (see checkpoint.go).
	rebuild time.Duration
	origin  IndexOrigin
	// closeReport is what Close did about the checkpoint.
	closeReport CheckpointReport
}

// Open opens the store kept in db, rebuilding the in-memory index and the
// lease sets by scanning every revision key (or loading the checkpoint the
// last Close wrote, when it provably describes db: see checkpoint.go and
// IndexOrigin). A compaction a crash interrupted is finished in the
// background, as etcd does (WaitCompaction waits for it); on a read-only
// db, by the next Open that may write. The Store uses the whole key space
// of db; close the Store before db. Durability follows db's
// configuration: with sync = true an acknowledged write survives a crash.
func Open(db *engine.DB, opts Options) (*Store, error) { return open(db, opts, false, nil) }

// open is Open; loading opens a store a Loader is finishing, which still
// holds its marker (see ErrIncompleteLoad). built, if not nil, is a
// restorer that met every revision of db already (RestoreSnapshot's, fed
// as the snapshot was written): its index is taken instead of scanning the
// revisions again.
func open(db *engine.DB, opts Options, loading bool, built *restorer) (*Store, error) {
	if db == nil {
		return nil, errors.New("mvcc: Open: db is nil")
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.ensureDefaults()
	s := &Store{db: db, opts: opts, ix: keyindex.New(), synced: newWatchGroup(), watchers: watcherSet{}, leases: newLeaseSet(),
		metrics: newCompactionMetrics()}
	start := time.Now()
	if err := upgradeLayout(db); err != nil {
		return nil, err
	}
	if _, incomplete, err := s.readMeta(metaLoading); err != nil {
		return nil, err
	} else if incomplete && !loading {
		return nil, fmt.Errorf("mvcc: Open: %w", ErrIncompleteLoad)
	}
	m, err := s.readStoreMeta()
	if err != nil {
		return nil, err
	}
	token, err := s.db.Get(metaCheckpointToken)
	if errors.Is(err, engine.ErrNotFound) {
		token, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mvcc: Open: read %s: %w", metaCheckpointToken, err)
	}
	if err := s.restoreLeases(); err != nil {
		return nil, err
	}
	s.dicts = newValueDicts(opts.RawValues)
	if err := s.dicts.load(db); err != nil {
		return nil, err
	}
	ck, err := s.takeCheckpoint(token, m, built == nil)
	if err != nil {
		return nil, err
	}
	var maxRev int64
	switch {
	case built != nil:
		s.ix, s.origin = built.index, IndexOrigin{Source: IndexFromSnapshot}
		maxRev, err = s.adopt(built)
	case ck != nil:
		s.ix, s.origin.Source, maxRev = ck.ix, IndexFromCheckpoint, ck.rev
		for _, kl := range ck.leased {
			// Checked by takeCheckpoint: the lease exists.
			_ = s.leases.attach(kl.key, kl.id)
		}
	default:
		maxRev, err = s.restore()
	}
	if err != nil {
		return nil, err
	}
	scheduled, finished := max(m.compactScheduled, 0), max(m.compactFinished, 0)
	s.rev = currentRev(max(m.rev, 0), maxRev, scheduled)
	s.compactRev = -1
	if m.compactScheduled >= 0 || m.compactFinished >= 0 {
		s.compactRev = max(scheduled, finished)
	}
	s.applied = uint64(max(m.applied, 0))
	s.lastRev, s.lastIndex = s.rev, s.applied
	s.notified = s.rev
	s.rebuild = time.Since(start)
	if opts.ReclaimHistory && !db.ReadOnly() {
		s.reclaim = newReclaimer(db)
	}
	if m.unfinishedCompaction() && !db.ReadOnly() {
		// A compaction was scheduled and not finished: its marker is in
		// storage, and reads below it fail already. It is finished in
		// the background while the store serves, as etcd's restore
		// schedules it: at 1.1 million pods a compaction drops about a
		// million revisions, work a restart need not wait for.
		// WaitCompaction, the next Compact and Close wait for it.
		resumed := &compactJob{rev: scheduled, step: 1, start: time.Now()}
		resumed.walk = s.ix.StartCompaction(scheduled, resumed.add)
		s.compactMu.Lock()
		s.runInBackground(resumed)
	}
	return s, nil
}

// currentRev is the current revision of a store whose metadata records
// rev, whose last version is at maxRev and whose last compaction was
// scheduled at compacted: the largest, and 1 for an empty store, as in
// etcd.
func currentRev(rev, maxRev, compacted int64) int64 { return max(rev, maxRev, compacted, 1) }

// upgradeLayout moves the leases and metadata of a store written before
// they sorted after the revisions (codec.go) to their keys now, in one
// batch: a crash leaves the old layout or the new one, and the next Open
// moves what is left.
func upgradeLayout(db *engine.DB) error {
	b := db.NewBatch()
	defer b.Close()
	moved := 0
	for _, prefix := range []struct{ old, now byte }{{oldLeasePrefix, leasePrefix}, {oldMetaPrefix, metaPrefix}} {
		it, err := db.NewIter(&engine.IterOptions{LowerBound: []byte{prefix.old}, UpperBound: []byte{prefix.old + 1}})
		if err != nil {
			return err
		}
		for ok := it.First(); ok; ok = it.Next() {
			k := append([]byte{prefix.now}, it.Key()[1:]...)
			v, err := it.ValueAndErr()
			if err == nil {
				err = b.Put(k, v)
			}
			if err == nil {
				err = b.Delete(it.Key())
			}
			if err != nil {
				it.Close()
				return fmt.Errorf("mvcc: Open: upgrade the key layout: %w", err)
			}
			moved++
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return fmt.Errorf("mvcc: Open: upgrade the key layout: %w", err)
		}
	}
	if moved == 0 {
		return nil
	}
	if err := b.Commit(); errors.Is(err, engine.ErrReadOnly) {
		return fmt.Errorf("mvcc: Open: the store keeps leases and metadata in the layout before (%d keys to move): open it once for writing (strata serve does) to upgrade it: %w", moved, err)
	} else if err != nil {
		return fmt.Errorf("mvcc: Open: upgrade the key layout: %w", err)
	}
	return nil
}

// readMeta reads a metadata value; found is false (and v 0) if absent.
func (s *Store) readMeta(key []byte) (v int64, found bool, err error) {
	b, err := s.db.Get(key)
	if errors.Is(err, engine.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("mvcc: read %s: %w", key, err)
	}
	v, err = decodeInt64(key, b)
	return v, err == nil, err
}

// Rev returns the current revision (etcd's header revision): 1 for an
// empty store, then the revision of the last acknowledged write.
func (s *Store) Rev() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// CompactRev returns the revision of the last compaction (0 if none):
// reads at revisions below it fail with ErrCompacted.
func (s *Store) CompactRev() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return max(s.compactRev, 0)
}

// AppliedIndex returns the log index of the last Entry whose writes are
// durable (0 if none): a replicated member resumes its log after it.
func (s *Store) AppliedIndex() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.applied
}

// RebuildDuration returns how long Open took to rebuild the index from
// storage or load it from the checkpoint (IndexOrigin says which), before
// finishing an interrupted compaction.
func (s *Store) RebuildDuration() time.Duration { return s.rebuild }

// IndexStats returns the memory statistics of the in-memory index.
func (s *Store) IndexStats() keyindex.Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ix.Stats()
}

// Close stops every watcher (their Err becomes ErrClosed), waits for
// running writes (until durable) and compactions, writes the key index
// checkpoint the next Open loads instead of reading every revision (see
// checkpoint.go; CheckpointAtClose says what it wrote, and a checkpoint
// that could not be written only makes that Open rebuild), and closes the
// store. It does not close the engine.DB.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if s.reclaim != nil {
		s.reclaim.stop()
	}
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.drainLocked()
	s.stopWatchers()
	s.wg.Wait()
	s.closeReport = s.writeCheckpoint()
	return nil
}
