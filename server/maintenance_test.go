package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestStatusAlarmMembers(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	addr := s.Addr().String()
	st, err := c.Status(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Header.MemberId == 0 || st.Leader != st.Header.MemberId || st.DbSize <= 0 || st.Version == "" || st.RaftTerm == 0 {
		t.Errorf("status: %+v", st)
	}
	al, err := c.AlarmList(ctx)
	if err != nil || len(al.Alarms) != 0 {
		t.Errorf("alarms: %+v, %v", al, err)
	}
	ml, err := c.MemberList(ctx)
	if err != nil || len(ml.Members) != 1 || ml.Members[0].ID != st.Header.MemberId || ml.Members[0].ClientURLs[0] != "http://"+addr {
		t.Errorf("members: %+v, %v", ml, err)
	}
	// What Strata does not implement says so.
	put, err := c.Put(ctx, "k", "v")
	if err != nil {
		t.Fatal(err)
	}
	if hk, err := c.HashKV(ctx, addr, 0); err != nil || hk.HashRevision != put.Header.Revision || hk.Hash == 0 {
		t.Errorf("hashkv: %+v, %v; want a hash at revision %d", hk, err, put.Header.Revision)
	}
	if _, err := c.HashKV(ctx, addr, put.Header.Revision+1); !errors.Is(err, rpctypes.ErrFutureRev) {
		t.Errorf("hashkv past the current revision: %v, want %v", err, rpctypes.ErrFutureRev)
	}
	if _, err := pb.NewMaintenanceClient(c.ActiveConnection()).Hash(ctx, &pb.HashRequest{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("hash: %v, want Unimplemented", err)
	}
	if _, err := c.AuthEnable(ctx); !errors.Is(err, rpctypes.ErrRootUserNotExist) {
		t.Errorf("auth enable without a root user: %v, want %v", err, rpctypes.ErrRootUserNotExist)
	}
	if _, err := c.MemberAdd(ctx, []string{"http://127.0.0.1:2380"}); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "single member") {
		t.Errorf("member add: %v, want Unimplemented", err)
	}
}

// TestEtcdctl drives the server with the stock etcdctl (v3).
func TestEtcdctl(t *testing.T) {
	bin, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl not installed (apt-get install etcd-client)")
	}
	s := startServer(t, testConfig(t))
	api := "3"
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--endpoints=http://" + s.Addr().String()}, args...)...)
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API="+api)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	for _, tt := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"put", "foo", "bar"}, "OK\n"},
		{"", []string{"put", "foo", "baz", "--prev-kv"}, "OK\nfoo\nbar\n"},
		{"", []string{"get", "foo"}, "foo\nbaz\n"},
		{"", []string{"get", "foo", "--rev=2"}, "foo\nbar\n"},
		{"", []string{"get", "f", "--prefix", "--keys-only"}, "foo\n\n"},
		{"value(\"foo\") = \"baz\"\n\nput foo qux\n\n\n", []string{"txn"}, "SUCCESS\n\nOK\n"},
		{"", []string{"del", "foo"}, "1\n"},
		{"", []string{"compaction", "3"}, "compacted revision 3\n"},
		{"", []string{"endpoint", "health"}, "is healthy"},
		{"", []string{"endpoint", "status"}, "true, false, 1,"}, // is leader, is learner, raft term
		{"", []string{"member", "list"}, "started, strata"},
		{"", []string{"lease", "grant", "30"}, "granted with TTL(30s)"},
		{"", []string{"defrag"}, "Finished defragmenting etcd member"},
		{"", []string{"endpoint", "hashkv"}, s.Addr().String() + ", "},
		{"", []string{"lock", "mylock", "echo", "held"}, "held\n"}, // the client-side recipe: leases, txns, watches
	} {
		if out := run(tt.stdin, tt.args...); !strings.Contains(out, tt.want) {
			t.Errorf("etcdctl %s:\n%s\nwant it to contain %q", strings.Join(tt.args, " "), out, tt.want)
		}
	}
	// etcdctl's v2 mode reads /v2/members, then uses the keys API.
	api = "2"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"set", "/v2key", "a"}, "a\n"},
		{[]string{"update", "/v2key", "b"}, "b\n"},
		{[]string{"get", "/v2key"}, "b\n"},
		{[]string{"set", "/v2key", "c", "--swap-with-value", "b"}, "c\n"},
		{[]string{"member", "list"}, "name=strata"},
		{[]string{"rm", "/v2key"}, "PrevNode.Value: c"},
	} {
		if out := run("", tt.args...); !strings.Contains(out, tt.want) {
			t.Errorf("ETCDCTL_API=2 etcdctl %s:\n%s\nwant it to contain %q", strings.Join(tt.args, " "), out, tt.want)
		}
	}
}

// TestDefragmentReclaimsSpace checks what `etcdctl defrag` is run for:
// after the keys are deleted and the history compacted, Defragment gives
// the space back, as the member's Status (dbSize) shows.
func TestDefragmentReclaimsSpace(t *testing.T) {
	cfg := testConfig(t)
	// The history reclaim would give the space back on its own, as soon
	// as the compaction ends, racing the Status before the defrag.
	cfg.Server.ReclaimHistory = false
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	addr := s.Addr().String()
	value := make([]byte, 2048)
	const n = 3000
	for i := range n {
		rand.Read(value) // incompressible, so the tables hold the bytes
		if _, err := c.Put(ctx, fmt.Sprintf("k%05d", i), string(value)); err != nil {
			t.Fatal(err)
		}
	}
	del, err := c.Delete(ctx, "k", clientv3.WithPrefix())
	if err != nil || del.Deleted != n {
		t.Fatalf("delete: %+v, %v", del, err)
	}
	if _, err := c.Compact(ctx, del.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	before, err := c.Status(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Defragment(ctx, addr); err != nil {
		t.Fatal(err)
	}
	after, err := c.Status(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dbSize %d -> %d bytes, in use %d -> %d", before.DbSize, after.DbSize, before.DbSizeInUse, after.DbSizeInUse)
	if before.DbSizeInUse < n*2048 || after.DbSizeInUse > before.DbSizeInUse/4 {
		t.Errorf("dbSizeInUse %d before the defragmentation, %d after: want at least %d before and a quarter of it after",
			before.DbSizeInUse, after.DbSizeInUse, n*2048)
	}
}

// TestStatusDBSizeLeavesOutRecycledWAL: the WAL files Pebble keeps for
// reuse after a flush are not part of Status's dbSize (etcdctl endpoint
// status's DB SIZE): they hold no data.
func TestStatusDBSizeLeavesOutRecycledWAL(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	for i := range 50 {
		if _, err := c.Put(ctx, fmt.Sprintf("k%d", i), strings.Repeat("v", 1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil { // the WAL rotates; the old one is kept for reuse
		t.Fatal(err)
	}
	// Background work may change the disk usage between the two reads:
	// compare reads that agree with one another before and after.
	for try := 0; ; try++ {
		em, err := s.db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if em.WAL.RecycledFiles == 0 || em.WAL.RecycledBytes == 0 {
			t.Fatalf("no recycled WAL file after a flush: %+v", em.WAL)
		}
		st, err := c.Status(ctx, s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		em2, err := s.db.Metrics()
		if err != nil {
			t.Fatal(err)
		}
		if em2.DiskUsageBytes != em.DiskUsageBytes && try < 20 {
			continue
		}
		if want := int64(em.DiskUsageBytes - em.WAL.RecycledBytes); st.DbSize != want {
			t.Errorf("dbSize = %d, want %d (disk usage %d less %d recycled WAL bytes)", st.DbSize, want, em.DiskUsageBytes, em.WAL.RecycledBytes)
		}
		if st.DbSizeInUse > st.DbSize {
			t.Errorf("dbSizeInUse %d > dbSize %d", st.DbSizeInUse, st.DbSize)
		}
		break
	}
}
