package auth

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stratadb/strata/mvcc"
)

// EtcdState is the auth state as etcd keeps it in its bbolt file: the
// authEnabled and authRevision values of its auth bucket (nil: absent),
// and its authUsers and authRoles buckets, name -> authpb.User or
// authpb.Role. A migration (internal/etcdfile) reads and writes the
// buckets; FromEtcd and ToEtcd map them to and from the aux keys, so that
// the mapping lives here, beside the keys it names.
type EtcdState struct {
	Enabled, Revision []byte
	Users, Roles      map[string][]byte
}

// FromEtcd returns the aux writes that hold st, in key order, after
// checking that every value decodes as the Store reads it (a user or
// role whose encoding names another name is refused).
func FromEtcd(st EtcdState) ([]mvcc.AuxWrite, error) {
	var out []mvcc.AuxWrite
	if st.Enabled != nil {
		out = append(out, mvcc.AuxWrite{Key: []byte(keyEnabled), Value: st.Enabled})
	}
	if st.Revision != nil {
		out = append(out, mvcc.AuxWrite{Key: []byte(keyRevision), Value: st.Revision})
	}
	for _, name := range slices.Sorted(maps.Keys(st.Users)) {
		out = append(out, mvcc.AuxWrite{Key: []byte(keyUser + name), Value: st.Users[name]})
	}
	for _, name := range slices.Sorted(maps.Keys(st.Roles)) {
		out = append(out, mvcc.AuxWrite{Key: []byte(keyRole + name), Value: st.Roles[name]})
	}
	b, err := decode(out)
	if err != nil {
		return nil, fmt.Errorf("etcd's auth buckets: %w", err)
	}
	for name, u := range b.users {
		if !bytes.Equal(u.Name, []byte(name)) {
			return nil, fmt.Errorf("etcd's auth buckets: authUsers key %q holds user %q", name, u.Name)
		}
	}
	for name, r := range b.roles {
		if !bytes.Equal(r.Name, []byte(name)) {
			return nil, fmt.Errorf("etcd's auth buckets: authRoles key %q holds role %q", name, r.Name)
		}
	}
	return out, nil
}

// ToEtcd returns the auth state held by aux, the store's aux key space
// (mvcc.Exported.Aux), as etcd keeps it. A store that never ran auth has
// none of the keys: it is etcd's state after its first start, auth
// disabled at auth revision 1.
func ToEtcd(aux []mvcc.AuxWrite) (EtcdState, error) {
	var mine []mvcc.AuxWrite
	for _, kv := range aux {
		if strings.HasPrefix(string(kv.Key), keyPrefix) {
			mine = append(mine, kv)
		}
	}
	b, err := decode(mine)
	if err != nil {
		return EtcdState{}, err
	}
	st := EtcdState{
		Enabled:  []byte{0},
		Revision: binary.BigEndian.AppendUint64(nil, max(b.revision, 1)),
		Users:    map[string][]byte{},
		Roles:    map[string][]byte{},
	}
	if b.enabled {
		st.Enabled[0] = 1
	}
	for _, kv := range mine {
		switch k := string(kv.Key); {
		case strings.HasPrefix(k, keyUser):
			st.Users[k[len(keyUser):]] = kv.Value
		case strings.HasPrefix(k, keyRole):
			st.Roles[k[len(keyRole):]] = kv.Value
		}
	}
	return st, nil
}
