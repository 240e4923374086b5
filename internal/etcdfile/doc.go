// Package etcdfile reads and writes etcd's data file, a bbolt database,
// so a store moves between etcd and Strata with every revision kept:
//
//	f, err := etcdfile.Open("backup.snap", nil) // etcdctl snapshot save, or member/snap/db
//	if err != nil { ... }                       // the checksum, the size, bbolt's own checks
//	defer f.Close()
//	l, _ := mvcc.NewLoader(db)                  // an empty engine.DB
//	store, err := f.Load(l, mvcc.Options{}, nil)
//
//	err = etcdfile.WriteSnapshot(store, "out.snap") // for etcdctl snapshot restore
//
// Open takes both forms etcd writes: a snapshot (`etcdctl snapshot save`:
// the bbolt file followed by its SHA-256, checked before anything is read)
// and a member's `member/snap/db` (the bbolt file alone, which has no
// checksum: bbolt's page check runs instead). Load reads every version in
// the `key` bucket (its whole history since the last compaction,
// tombstones included), the leases with their TTLs, and the compaction and
// current revisions from `meta`, into an mvcc.Loader. WriteSnapshot writes
// the reverse, a file `etcdctl snapshot restore` accepts.
//
// The layout (etcd's server/storage/schema, the same in etcd 3.4 to 3.7):
//
//	key      revision (8-byte big-endian main, '_', 8-byte big-endian sub,
//	         then 't' for a deletion) -> mvccpb.KeyValue
//	lease    lease ID (8-byte big-endian) -> leasepb.Lease{ID, TTL}
//	meta     scheduledCompactRev, finishedCompactRev (revisions as above),
//	         consistent_index, term (8-byte big-endian), storageVersion
//	members, members_removed, cluster, alarm, auth, authUsers, authRoles
//
// Not carried over: the member list and cluster ID (a restore makes a new
// cluster, in etcd as here), alarms, and auth users and roles (Strata has
// no auth store to load them into yet: Load counts them in its Report so
// the restore says what it left behind). mvcc imports no etcd package;
// this one is the bridge.
package etcdfile
