package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/authpb"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdauth "go.etcd.io/etcd/server/v3/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// rawCodec sends a message's bytes as they are: the fuzzers' requests
// reach the server's own decoding (gRPC's proto codec) unchanged.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// rawConn is a gRPC connection to s whose calls send raw bytes.
func rawConn(tb testing.TB, s *Server) *grpc.ClientConn {
	tb.Helper()
	cc, err := grpc.NewClient(s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// fuzzCall sends body as the request of method and checks the answer: a
// response, or a status of the server's error table, never Unknown (not
// a status, but for etcd's own) or Internal (an error the table does not know, which would
// stop the node in apply). No answer in 10 s fails too.
func fuzzCall(t *testing.T, cc *grpc.ClientConn, ctx context.Context, method string, body []byte) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out []byte
	err := cc.Invoke(ctx, method, &body, &out)
	switch c := status.Code(err); c {
	case codes.OK, codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.OutOfRange,
		codes.PermissionDenied, codes.Unauthenticated, codes.ResourceExhausted, codes.Unimplemented,
		codes.AlreadyExists, codes.Canceled, codes.Unavailable:
	case codes.Unknown:
		// etcd's own answer to a password for a user without one: its
		// v3rpc has no status for it (auth.GRPCError).
		if status.Convert(err).Message() != etcdauth.ErrNoPasswordUser.Error() {
			t.Fatalf("%s %x: %v", method, body, err)
		}
	case codes.Internal:
		// gRPC's own answer to bytes that do not decode, as etcd's.
		if !strings.HasPrefix(status.Convert(err).Message(), "grpc: error unmarshalling request") {
			t.Fatalf("%s %x: %v", method, body, err)
		}
	default:
		t.Fatalf("%s %x: %v", method, body, err)
	}
}

// fuzzStoreUsable checks that the store still takes a write and serves
// it, once the alarms a fuzzed request may have raised are disarmed.
func fuzzStoreUsable(t *testing.T, c *clientv3.Client, ctx context.Context) {
	if _, err := c.Put(ctx, "fuzz/sentinel", "v"); err != nil {
		if !errors.Is(err, rpctypes.ErrNoSpace) && !errors.Is(err, rpctypes.ErrCorrupt) {
			t.Fatalf("put after the request: %v", err)
		}
		alarms, err := c.AlarmList(ctx)
		if err != nil {
			t.Fatalf("alarm list: %v", err)
		}
		for _, a := range alarms.Alarms {
			if _, err := c.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
				t.Fatalf("alarm disarm %v: %v", a, err)
			}
		}
		if _, err := c.Put(ctx, "fuzz/sentinel", "v"); err != nil {
			t.Fatalf("put after the request, alarms disarmed: %v", err)
		}
	}
	if g, err := c.Get(ctx, "fuzz/sentinel"); err != nil || g.Count != 1 {
		t.Fatalf("get after the request: %v, %+v", err, g)
	}
}

// grpcFuzzMethods are the unary calls FuzzGRPC aims at: every KV, Lease
// and Maintenance call that keeps a single member serving (not
// Defragment, MoveLeader, Downgrade, the member changes), and MemberList.
var grpcFuzzMethods = []string{
	"/etcdserverpb.KV/Range", "/etcdserverpb.KV/Put", "/etcdserverpb.KV/DeleteRange", "/etcdserverpb.KV/Txn",
	"/etcdserverpb.KV/Compact", "/etcdserverpb.Lease/LeaseGrant", "/etcdserverpb.Lease/LeaseRevoke",
	"/etcdserverpb.Lease/LeaseTimeToLive", "/etcdserverpb.Lease/LeaseLeases", "/etcdserverpb.Maintenance/Alarm",
	"/etcdserverpb.Maintenance/Status", "/etcdserverpb.Maintenance/Hash", "/etcdserverpb.Maintenance/HashKV",
	"/etcdserverpb.Cluster/MemberList",
}

// fuzzSeed returns a request's bytes for f.Add.
func fuzzSeed(tb testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// FuzzGRPC sends arbitrary bytes as the request of a v3 call over a real
// gRPC connection: the server decodes them into etcd's request types and
// serves them. No request may panic or hang, every error is a status of
// the error table (not Internal, which would stop the node in apply),
// and the store takes and serves a write after each one. CI runs the
// seed corpus (testdata/fuzz/FuzzGRPC).
func FuzzGRPC(f *testing.F) {
	put := func(k, v string) *pb.PutRequest { return &pb.PutRequest{Key: []byte(k), Value: []byte(v)} }
	for _, seed := range []struct {
		method uint8
		req    proto.Message
	}{
		{0, &pb.RangeRequest{Key: []byte("a"), RangeEnd: []byte{0}, Limit: -3, SortOrder: 7}},
		{0, &pb.RangeRequest{Key: []byte("a"), Revision: -1, MinModRevision: 5, MaxCreateRevision: -2}},
		{1, put("k", "v")},
		{1, &pb.PutRequest{Key: []byte("k"), Lease: 12345, IgnoreValue: true, IgnoreLease: true}},
		{2, &pb.DeleteRangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, PrevKv: true}},
		{3, &pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_LEASE, Result: 9, RangeEnd: []byte("a")}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{
				{Request: &pb.RequestOp_RequestPut{RequestPut: put("k", "x")}}, {}}}}}},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}}},
		}},
		{4, &pb.CompactionRequest{Revision: 1 << 40, Physical: true}},
		{5, &pb.LeaseGrantRequest{TTL: -1, ID: -7}},
		{6, &pb.LeaseRevokeRequest{ID: 0}},
		{7, &pb.LeaseTimeToLiveRequest{ID: 1, Keys: true}},
		{9, &pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, Alarm: pb.AlarmType_NOSPACE, MemberID: 1}},
		{9, &pb.AlarmRequest{Action: 7, Alarm: 9}},
		{12, &pb.HashKVRequest{Revision: -1}},
	} {
		f.Add(seed.method, fuzzSeed(f, seed.req))
	}
	f.Add(uint8(3), []byte{0x12, 0x02, 0x1a, 0x00}) // a txn op of an empty put... and a bad tag
	f.Add(uint8(1), []byte{0xff, 0xff, 0xff})
	cfg := testConfig(f)
	cfg.Server.MaxRequestBytes = 64 << 10
	s := startServer(f, cfg)
	cc := rawConn(f, s)
	c := newClient(f, s, nil)
	f.Fuzz(func(t *testing.T, method uint8, body []byte) {
		ctx := t.Context()
		fuzzCall(t, cc, ctx, grpcFuzzMethods[int(method)%len(grpcFuzzMethods)], body)
		fuzzStoreUsable(t, c, ctx)
	})
}

// authFuzzMethods are the Auth service's calls.
var authFuzzMethods = []string{
	"/etcdserverpb.Auth/AuthEnable", "/etcdserverpb.Auth/AuthDisable", "/etcdserverpb.Auth/AuthStatus",
	"/etcdserverpb.Auth/Authenticate", "/etcdserverpb.Auth/UserAdd", "/etcdserverpb.Auth/UserGet",
	"/etcdserverpb.Auth/UserList", "/etcdserverpb.Auth/UserDelete", "/etcdserverpb.Auth/UserChangePassword",
	"/etcdserverpb.Auth/UserGrantRole", "/etcdserverpb.Auth/UserRevokeRole", "/etcdserverpb.Auth/RoleAdd",
	"/etcdserverpb.Auth/RoleGet", "/etcdserverpb.Auth/RoleList", "/etcdserverpb.Auth/RoleDelete",
	"/etcdserverpb.Auth/RoleGrantPermission", "/etcdserverpb.Auth/RoleRevokePermission",
}

// FuzzAuth sends arbitrary bytes as an Auth request (users, roles,
// permissions, enable, authenticate) with an arbitrary token, then a
// Range with that token: no panic, no hang, every error a status of the
// error tables. After each input the store takes a write as root
// through the apply path, and auth is disabled again (as root) so that
// the next input starts from an open server. CI runs the seed corpus
// (testdata/fuzz/FuzzAuth).
func FuzzAuth(f *testing.F) {
	perm := func(t authpb.Permission_Type, key, end string) *pb.AuthRoleGrantPermissionRequest {
		return &pb.AuthRoleGrantPermissionRequest{Name: "r", Perm: &authpb.Permission{PermType: t, Key: []byte(key), RangeEnd: []byte(end)}}
	}
	for _, seed := range []struct {
		method uint8
		req    proto.Message
		token  string
	}{
		{0, &pb.AuthEnableRequest{}, ""},
		{3, &pb.AuthenticateRequest{Name: "root", Password: "root"}, ""},
		{4, &pb.AuthUserAddRequest{Name: "root", Password: "root"}, ""},
		{4, &pb.AuthUserAddRequest{Name: "", Options: nil}, "x.y"},
		{4, &pb.AuthUserAddRequest{Name: "u", Password: "p", HashedPassword: "$2a$04$notahash"}, ""},
		{4, &pb.AuthUserAddRequest{Name: "nopw", Options: nil, Password: ""}, ""},
		{7, &pb.AuthUserDeleteRequest{Name: "root"}, ""},
		{8, &pb.AuthUserChangePasswordRequest{Name: "u", HashedPassword: "plain"}, ""},
		{9, &pb.AuthUserGrantRoleRequest{User: "root", Role: "root"}, ""},
		{10, &pb.AuthUserRevokeRoleRequest{Name: "root", Role: "root"}, ""},
		{11, &pb.AuthRoleAddRequest{Name: "r"}, ""},
		{14, &pb.AuthRoleDeleteRequest{Role: "root"}, ""},
		{15, perm(authpb.READWRITE, "a", "\x00"), ""},
		{15, perm(7, "", "a"), ""},
		{16, &pb.AuthRoleRevokePermissionRequest{Role: "r", Key: []byte("a"), RangeEnd: []byte{0}}, ""},
		{2, &pb.AuthStatusRequest{}, "simpletoken.1"},
	} {
		f.Add(seed.method, fuzzSeed(f, seed.req), seed.token)
	}
	cfg := testConfig(f)
	cfg.Server.MaxRequestBytes = 64 << 10
	cfg.Server.BcryptCost = 4 // the fastest: the fuzzer adds users
	s := startServer(f, cfg)
	cc := rawConn(f, s)
	f.Fuzz(func(t *testing.T, method uint8, body []byte, token string) {
		if strings.ContainsFunc(token, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			return // gRPC metadata carries printable ASCII only: no client sends it
		}
		ctx := t.Context()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, rpctypes.TokenFieldNameGRPC, token)
		}
		fuzzCall(t, cc, ctx, authFuzzMethods[int(method)%len(authFuzzMethods)], body)
		fuzzCall(t, cc, ctx, "/etcdserverpb.KV/Range", fuzzSeed(t, &pb.RangeRequest{Key: []byte("a")}))
		root := s.auth.WithRoot(t.Context())
		if _, err := s.propose(root, &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("fuzz/sentinel")}}); err != nil {
			t.Fatalf("put as root after the request: %v", err)
		}
		if _, err := s.propose(root, &pb.InternalRaftRequest{AuthDisable: &pb.AuthDisableRequest{}}); err != nil {
			t.Fatalf("auth disable as root after the request: %v", err)
		}
		res, err := s.rangeKV(t.Context(), &pb.RangeRequest{Key: []byte("fuzz/sentinel")})
		if err != nil || res.Count != 1 {
			t.Fatalf("range after the request: %v, %v", err, fmt.Sprint(res))
		}
	})
}
