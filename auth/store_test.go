package auth

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	etcdauth "go.etcd.io/etcd/server/v3/auth"

	"github.com/stratadb/strata/mvcc"
)

// memStorage is a Storage in a map that records each commit.
type memStorage struct {
	kv      map[string][]byte
	commits []string // "index: key key ..."
}

func (m *memStorage) ReadAux(prefix []byte) ([]mvcc.AuxWrite, error) {
	var keys []string
	for k := range m.kv {
		if strings.HasPrefix(k, string(prefix)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]mvcc.AuxWrite, len(keys))
	for i, k := range keys {
		out[i] = mvcc.AuxWrite{Key: []byte(k), Value: m.kv[k]}
	}
	return out, nil
}

func (m *memStorage) WriteAux(index uint64, ws []mvcc.AuxWrite) error {
	c := fmt.Sprintf("%d:", index)
	for _, w := range ws {
		if w.Value == nil {
			delete(m.kv, string(w.Key))
			c += " -" + string(w.Key)
		} else {
			m.kv[string(w.Key)] = w.Value
			c += " " + string(w.Key)
		}
	}
	m.commits = append(m.commits, c)
	return nil
}

// TestApplyStoresThroughStorage: each auth command's changes are
// committed with its index (a refused one records the index alone), the
// password never reaches the log or storage, and a store reloaded from
// storage holds the same state.
func TestApplyStoresThroughStorage(t *testing.T) {
	st := &memStorage{kv: map[string][]byte{}}
	s, err := Open(Config{BcryptCost: 4}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add := &pb.AuthUserAddRequest{Name: "root", Password: "secret"}
	if err := s.HashPassword(&add.Password, &add.HashedPassword); err != nil {
		t.Fatal(err)
	}
	if add.Password != "" || add.HashedPassword == "" {
		t.Fatalf("after hashing: %+v", add)
	}
	root := &pb.RequestHeader{Username: "root"}
	for i, r := range []*pb.InternalRaftRequest{
		{AuthUserAdd: add},
		{AuthUserAdd: add}, // refused: exists
		{AuthUserGrantRole: &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}},
		{AuthEnable: &pb.AuthEnableRequest{}},
		{Header: &pb.RequestHeader{Username: "bob", AuthRevision: 9}, AuthRoleAdd: &pb.AuthRoleAddRequest{Name: "x"}}, // refused: not root
		{Header: root, AuthRoleAdd: &pb.AuthRoleAddRequest{Name: "x"}},
	} {
		if _, _, err := s.Apply(uint64(10+i), r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"0: auth/revision",
		"10: auth/revision auth/user/root",
		"11:",
		"12: auth/revision auth/user/root",
		"13: auth/enabled",
		"14:",
		"15: auth/revision auth/role/x",
	}
	if got := strings.Join(st.commits, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("commits:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	for k, v := range st.kv {
		if strings.Contains(string(v), "secret") {
			t.Errorf("stored %s holds the password", k)
		}
	}
	if _, _, err := s.Authenticate(&pb.AuthenticateRequest{Name: "root", Password: "wrong"}); !errors.Is(err, etcdauth.ErrAuthFailed) {
		t.Errorf("a wrong password: %v", err)
	}
	again, err := Open(Config{BcryptCost: 4}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if !again.Enabled() || again.Revision() != s.Revision() || again.Revision() != 4 {
		t.Errorf("reloaded: enabled %v, revision %d; want enabled at %d (= 4)", again.Enabled(), again.Revision(), s.Revision())
	}
	if _, _, err := again.Authenticate(&pb.AuthenticateRequest{Name: "root", Password: "secret"}); err != nil {
		t.Errorf("the reloaded store checks the password: %v", err)
	}
}
