package auth

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/authpb"
	etcdauth "go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/mvcc"
)

// Storage is where the auth state is kept: the mvcc store's aux key
// space, written through the apply path so that it is replicated, restored
// from snapshots and kept across restarts with the key-value data.
type Storage interface {
	// ReadAux returns every aux key that starts with prefix, in key order.
	ReadAux(prefix []byte) ([]mvcc.AuxWrite, error)
	// WriteAux applies writes atomically, recording the log index (0: no
	// log position); no writes records the index only.
	WriteAux(index uint64, writes []mvcc.AuxWrite) error
}

// The aux keys of the auth state (etcd's auth, authUsers and authRoles
// buckets): values are etcd's own encodings (authpb.User, authpb.Role).
const (
	keyPrefix   = "auth/"
	keyEnabled  = keyPrefix + "enabled"  // 1 byte, 0 or 1
	keyRevision = keyPrefix + "revision" // 8 bytes, big-endian
	keyUser     = keyPrefix + "user/"    // + name -> authpb.User
	keyRole     = keyPrefix + "role/"    // + name -> authpb.Role
)

// backend is etcd's auth.AuthBackend over Storage: the whole auth state
// in memory (it is small: users and roles), loaded at start and after a
// snapshot, with the writes of one command staged until the applier
// commits them with the command's log index (commit). etcd's authStore
// does its reads and writes through it under its own locking discipline
// (BatchTx for writes, ReadTx for reads).
//
// The getters return copies: etcd's authStore changes the users and roles
// it reads before it writes them back, as it may with bbolt, whose reads
// decode a new value each time.
type backend struct {
	mu       sync.RWMutex
	enabled  bool
	revision uint64
	users    map[string]*authpb.User
	roles    map[string]*authpb.Role
	// staged are the writes since the last commit, by aux key; a nil
	// value deletes.
	staged map[string][]byte
	// stageErr is the first write that could not be staged.
	stageErr error
}

var (
	_ etcdauth.AuthBackend = (*backend)(nil)
	_ etcdauth.AuthBatchTx = (*backend)(nil)
	_ etcdauth.AuthReadTx  = (*backend)(nil)
)

// load reads the auth state from st.
func load(st Storage) (*backend, error) {
	kvs, err := st.ReadAux([]byte(keyPrefix))
	if err != nil {
		return nil, err
	}
	return decode(kvs)
}

// decode reads the auth state from its aux keys, checking every value.
func decode(kvs []mvcc.AuxWrite) (*backend, error) {
	b := &backend{users: map[string]*authpb.User{}, roles: map[string]*authpb.Role{}, staged: map[string][]byte{}}
	for _, kv := range kvs {
		k := string(kv.Key)
		switch {
		case k == keyEnabled:
			if len(kv.Value) != 1 || kv.Value[0] > 1 {
				return nil, fmt.Errorf("auth: stored %s = %x: want one byte, 0 or 1", k, kv.Value)
			}
			b.enabled = kv.Value[0] == 1
		case k == keyRevision:
			if len(kv.Value) != 8 {
				return nil, fmt.Errorf("auth: stored %s = %x: want 8 bytes", k, kv.Value)
			}
			b.revision = binary.BigEndian.Uint64(kv.Value)
		case strings.HasPrefix(k, keyUser):
			u := new(authpb.User)
			if err := proto.Unmarshal(kv.Value, u); err != nil {
				return nil, fmt.Errorf("auth: stored user %q: %w", k[len(keyUser):], err)
			}
			b.users[k[len(keyUser):]] = u
		case strings.HasPrefix(k, keyRole):
			r := new(authpb.Role)
			if err := proto.Unmarshal(kv.Value, r); err != nil {
				return nil, fmt.Errorf("auth: stored role %q: %w", k[len(keyRole):], err)
			}
			b.roles[k[len(keyRole):]] = r
		default:
			return nil, fmt.Errorf("auth: unknown stored key %q", k)
		}
	}
	return b, nil
}

// takeStaged returns the writes staged since the last call, in key order,
// and forgets them.
func (b *backend) takeStaged() ([]mvcc.AuxWrite, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.stageErr; err != nil {
		b.stageErr = nil
		clear(b.staged)
		return nil, err
	}
	keys := make([]string, 0, len(b.staged))
	for k := range b.staged {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]mvcc.AuxWrite, len(keys))
	for i, k := range keys {
		out[i] = mvcc.AuxWrite{Key: []byte(k), Value: b.staged[k]}
	}
	clear(b.staged)
	return out, nil
}

// The AuthBackend methods.

func (b *backend) CreateAuthBuckets()            {}
func (b *backend) ForceCommit()                  {} // the applier commits (Store.apply)
func (b *backend) ReadTx() etcdauth.AuthReadTx   { return b }
func (b *backend) BatchTx() etcdauth.AuthBatchTx { return b }
func (b *backend) GetUser(name string) *authpb.User {
	b.RLock()
	defer b.RUnlock()
	return b.UnsafeGetUser(name)
}
func (b *backend) GetRole(name string) *authpb.Role {
	b.RLock()
	defer b.RUnlock()
	return b.UnsafeGetRole(name)
}

func (b *backend) GetAllUsers() []*authpb.User {
	b.RLock()
	defer b.RUnlock()
	return b.UnsafeGetAllUsers()
}

func (b *backend) GetAllRoles() []*authpb.Role {
	b.RLock()
	defer b.RUnlock()
	return b.UnsafeGetAllRoles()
}

// The transaction methods: one lock for the reads and writes of both.

func (b *backend) Lock()    { b.mu.Lock() }
func (b *backend) Unlock()  { b.mu.Unlock() }
func (b *backend) RLock()   { b.mu.RLock() }
func (b *backend) RUnlock() { b.mu.RUnlock() }

func (b *backend) UnsafeReadAuthEnabled() bool    { return b.enabled }
func (b *backend) UnsafeReadAuthRevision() uint64 { return b.revision }

func (b *backend) UnsafeGetUser(name string) *authpb.User {
	if u := b.users[name]; u != nil {
		return proto.Clone(u).(*authpb.User)
	}
	return nil
}

func (b *backend) UnsafeGetRole(name string) *authpb.Role {
	if r := b.roles[name]; r != nil {
		return proto.Clone(r).(*authpb.Role)
	}
	return nil
}

// UnsafeGetAllUsers returns the users in name order, as etcd's bucket
// scan does.
func (b *backend) UnsafeGetAllUsers() []*authpb.User {
	names := make([]string, 0, len(b.users))
	for n := range b.users {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*authpb.User, len(names))
	for i, n := range names {
		out[i] = b.UnsafeGetUser(n)
	}
	return out
}

// UnsafeGetAllRoles returns the roles in name order.
func (b *backend) UnsafeGetAllRoles() []*authpb.Role {
	names := make([]string, 0, len(b.roles))
	for n := range b.roles {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]*authpb.Role, len(names))
	for i, n := range names {
		out[i] = b.UnsafeGetRole(n)
	}
	return out
}

func (b *backend) UnsafeSaveAuthEnabled(enabled bool) {
	b.enabled = enabled
	v := byte(0)
	if enabled {
		v = 1
	}
	b.staged[keyEnabled] = []byte{v}
}

func (b *backend) UnsafeSaveAuthRevision(rev uint64) {
	b.revision = rev
	b.staged[keyRevision] = binary.BigEndian.AppendUint64(nil, rev)
}

func (b *backend) UnsafePutUser(u *authpb.User) {
	u = proto.Clone(u).(*authpb.User)
	b.users[string(u.Name)] = u
	b.staged[keyUser+string(u.Name)] = b.marshal(u)
}

func (b *backend) UnsafeDeleteUser(name string) {
	delete(b.users, name)
	b.staged[keyUser+name] = nil
}

func (b *backend) UnsafePutRole(r *authpb.Role) {
	r = proto.Clone(r).(*authpb.Role)
	b.roles[string(r.Name)] = r
	b.staged[keyRole+string(r.Name)] = b.marshal(r)
}

func (b *backend) UnsafeDeleteRole(name string) {
	delete(b.roles, name)
	b.staged[keyRole+name] = nil
}

// marshal encodes a user or role for staging; a failure (proto's check
// of string fields; the API decoded them, so it cannot happen) is kept
// for takeStaged to report.
func (b *backend) marshal(m proto.Message) []byte {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil && b.stageErr == nil {
		b.stageErr = fmt.Errorf("auth: encode %v: %w", m, err)
	}
	return v
}
