package auth

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/authpb"
	"google.golang.org/protobuf/proto"
)

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEtcdStateRoundTrip: FromEtcd then ToEtcd gives back etcd's buckets
// byte for byte, and the aux writes load as the Store reads them.
func TestEtcdStateRoundTrip(t *testing.T) {
	st := EtcdState{
		Enabled:  []byte{1},
		Revision: binary.BigEndian.AppendUint64(nil, 8),
		Users: map[string][]byte{
			"root":  marshal(t, &authpb.User{Name: []byte("root"), Password: []byte("$2a$10$hash"), Roles: []string{"root"}}),
			"alice": marshal(t, &authpb.User{Name: []byte("alice"), Password: []byte("$2a$10$hash2"), Roles: []string{"app"}}),
		},
		Roles: map[string][]byte{
			"app": marshal(t, &authpb.Role{Name: []byte("app"), KeyPermission: []*authpb.Permission{{PermType: authpb.READWRITE, Key: []byte("app/"), RangeEnd: []byte("app0")}}}),
		},
	}
	aux, err := FromEtcd(st)
	if err != nil {
		t.Fatal(err)
	}
	b, err := decode(aux)
	if err != nil {
		t.Fatal(err)
	}
	if !b.enabled || b.revision != 8 || len(b.users) != 2 || string(b.roles["app"].KeyPermission[0].Key) != "app/" {
		t.Errorf("loaded enabled %t, revision %d, users %v, roles %v", b.enabled, b.revision, b.users, b.roles)
	}
	back, err := ToEtcd(aux)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, st) {
		t.Errorf("ToEtcd(FromEtcd(st)) = %+v, want %+v", back, st)
	}
	// A store that never ran auth: etcd's first-start state.
	none, err := ToEtcd(nil)
	if err != nil || none.Enabled[0] != 0 || binary.BigEndian.Uint64(none.Revision) != 1 || len(none.Users)+len(none.Roles) != 0 {
		t.Errorf("ToEtcd(nil) = %+v, %v", none, err)
	}
}

// TestFromEtcdRefuses: bad values are refused naming what is wrong.
func TestFromEtcdRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		st   EtcdState
		want string
	}{
		"enabled 2":      {EtcdState{Enabled: []byte{2}}, "want one byte, 0 or 1"},
		"short revision": {EtcdState{Revision: []byte{1}}, "want 8 bytes"},
		"garbage user":   {EtcdState{Users: map[string][]byte{"bob": {0xff, 0xff}}}, `user "bob"`},
		"garbage role":   {EtcdState{Roles: map[string][]byte{"r": {0xff, 0xff}}}, `role "r"`},
		"user renamed":   {EtcdState{Users: map[string][]byte{"bob": marshal(t, &authpb.User{Name: []byte("eve")})}}, `authUsers key "bob" holds user "eve"`},
		"role renamed":   {EtcdState{Roles: map[string][]byte{"r": marshal(t, &authpb.Role{Name: []byte("s")})}}, `authRoles key "r" holds role "s"`},
	} {
		if _, err := FromEtcd(tc.st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
