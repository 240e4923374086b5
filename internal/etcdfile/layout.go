package etcdfile

import (
	"encoding/binary"
	"fmt"
)

// Bucket and key names of etcd's schema (server/storage/schema/bucket.go).
var (
	bucketKey            = []byte("key")
	bucketMeta           = []byte("meta")
	bucketLease          = []byte("lease")
	bucketAlarm          = []byte("alarm")
	bucketCluster        = []byte("cluster")
	bucketMembers        = []byte("members")
	bucketMembersRemoved = []byte("members_removed")
	bucketAuth           = []byte("auth")
	bucketAuthUsers      = []byte("authUsers")
	bucketAuthRoles      = []byte("authRoles")

	// allBuckets are the buckets WriteSnapshot creates, as etcd's
	// backend does at its first start.
	allBuckets = [][]byte{bucketKey, bucketMeta, bucketLease, bucketAlarm, bucketCluster,
		bucketMembers, bucketMembersRemoved, bucketAuth, bucketAuthUsers, bucketAuthRoles}

	metaScheduledCompact = []byte("scheduledCompactRev")
	metaFinishedCompact  = []byte("finishedCompactRev")
	metaConsistentIndex  = []byte("consistent_index")
	metaTerm             = []byte("term")
	metaStorageVersion   = []byte("storageVersion")
	authEnabled          = []byte("authEnabled")
	authRevision         = []byte("authRevision")
)

// storageVersion is the schema version WriteSnapshot records: etcd 3.6
// and later read it (3.4 and 3.5 ignore it); the 3.6 schema is 3.5's
// plus this field, and 3.7 changed nothing.
const storageVersion = "3.6"

const (
	revBytesLen = 8 + 1 + 8
	tombstone   = 't'
)

// appendRev appends etcd's encoding of revision main.sub, with the
// tombstone mark if tomb.
func appendRev(b []byte, main, sub int64, tomb bool) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(main))
	b = append(b, '_')
	b = binary.BigEndian.AppendUint64(b, uint64(sub))
	if tomb {
		b = append(b, tombstone)
	}
	return b
}

// parseRev parses a key bucket key (or a compaction revision, which has
// no tombstone mark).
func parseRev(k []byte) (main, sub int64, tomb bool, err error) {
	switch {
	case len(k) == revBytesLen+1 && k[revBytesLen] == tombstone:
		tomb = true
	case len(k) != revBytesLen:
		return 0, 0, false, fmt.Errorf("revision key %x: %d bytes, want %d or %d with a tombstone mark", k, len(k), revBytesLen, revBytesLen+1)
	}
	if k[8] != '_' {
		return 0, 0, false, fmt.Errorf("revision key %x: no '_' between main and sub revision", k)
	}
	main, sub = int64(binary.BigEndian.Uint64(k)), int64(binary.BigEndian.Uint64(k[9:]))
	return main, sub, tomb, nil
}
