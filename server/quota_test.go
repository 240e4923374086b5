package server

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/testport"
)

// startAgain starts a server on cfg's database with a new port, closed at
// the end of the test unless the caller closed it first.
func startAgain(t *testing.T, cfg *config.Config) *Server {
	t.Helper()
	cfg = cfg.Clone()
	cfg.Server.Listen = testport.Addr(t)
	return startServer(t, cfg)
}

// closeNow closes s, failing the test on an error.
func closeNow(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// randomValue is n bytes that do not compress.
func randomValue(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// isNoSpace reports whether err is etcd's "database space exceeded" as
// clientv3 returns it: ResourceExhausted with etcd's message.
func isNoSpace(err error) bool {
	var ee rpctypes.EtcdError
	return errors.Is(err, rpctypes.ErrNoSpace) && errors.As(err, &ee) &&
		ee.Code() == codes.ResourceExhausted && ee.Error() == "etcdserver: mvcc: database space exceeded"
}

// fillPastQuota puts 64 KiB values over 8 keys until a put fails, and
// returns that error. It fails the test unless the failure came within a
// second of the database reaching quota (as Status reports its size), or
// before.
func fillPastQuota(t *testing.T, c *clientv3.Client, s *Server, quota int64) error {
	t.Helper()
	ctx := testCtx(t)
	var crossed time.Time
	for i := range 4000 {
		_, err := c.Put(ctx, fmt.Sprintf("k/%d", i%8), randomValue(t, 64<<10))
		if err != nil {
			if !crossed.IsZero() && time.Since(crossed) > time.Second {
				t.Errorf("refused %v after the database reached the quota, want within a second", time.Since(crossed))
			}
			return err
		}
		st, err := c.Status(ctx, s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if st.DbSize >= quota && crossed.IsZero() {
			crossed = time.Now()
		}
	}
	t.Fatalf("4000 puts of 64 KiB all accepted with quota_backend_bytes = %d", quota)
	return nil
}

// waitAlarms waits up to 5 s for the member's alarm list to be want.
func waitAlarms(t *testing.T, c *clientv3.Client, want ...*pb.AlarmMember) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := c.AlarmList(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		got := fmt.Sprint(resp.Alarms)
		if got == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarms %s, want %s", got, fmt.Sprint(want))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestQuotaNoSpace is etcd's quota on one member with clientv3: past a
// tiny quota_backend_bytes, puts fail with etcd's ResourceExhausted
// "database space exceeded" within a second and the NOSPACE alarm is
// raised; reads, deletes, txns without puts, lease revokes, compaction,
// defragmentation and snapshots go on, while puts, txns with a put and
// lease grants are refused; /health fails with "ALARM NOSPACE" unless
// ?exclude=NOSPACE, /livez and /readyz pass; the metrics and Status say
// the quota; a disarm with the database still over the quota is
// followed by a refusal and the alarm again, and once compaction and
// defragmentation took it under, a disarm lets puts through.
func TestQuotaNoSpace(t *testing.T) {
	const quota = 8 << 20
	cfg := testConfig(t)
	cfg.Server.QuotaBackendBytes = quota
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	addr := s.Addr().String()
	lease, err := c.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "leased", "v", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	if err := fillPastQuota(t, c, s, quota); !isNoSpace(err) {
		t.Fatalf("put past the quota: %v, want %v", err, rpctypes.ErrGRPCNoSpace)
	}
	st, err := c.Status(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	me := st.Header.MemberId
	nospace := &pb.AlarmMember{MemberID: me, Alarm: pb.AlarmType_NOSPACE}
	waitAlarms(t, c, nospace)
	if st, err = c.Status(ctx, addr); err != nil || st.DbSizeQuota != quota || fmt.Sprint(st.Errors) != fmt.Sprint([]string{nospace.String()}) {
		t.Errorf("status with the alarm: quota %d, errors %q, %v", st.DbSizeQuota, st.Errors, err)
	}

	// Disarmed with the cause still there: the next write that does not
	// fit is refused, and the alarm is raised again.
	dr, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{})
	if err != nil || fmt.Sprint(dr.Alarms) != fmt.Sprint([]*pb.AlarmMember{nospace}) {
		t.Fatalf("disarm: %v, %v", dr, err)
	}
	if _, err := c.Put(ctx, "k/0", randomValue(t, 64<<10)); !isNoSpace(err) {
		t.Errorf("put after a disarm with the database still over the quota: %v", err)
	}
	waitAlarms(t, c, nospace)

	// What the alarm refuses, whatever the size: puts, txns that put,
	// lease grants.
	if _, err := c.Put(ctx, "small", "v"); !isNoSpace(err) {
		t.Errorf("put: %v", err)
	}
	if _, err := c.Txn(ctx).Then(clientv3.OpTxn(nil, []clientv3.Op{clientv3.OpPut("small", "v")}, nil)).Commit(); !isNoSpace(err) {
		t.Errorf("txn with a nested put: %v", err)
	}
	if _, err := c.Grant(ctx, 60); !isNoSpace(err) {
		t.Errorf("lease grant: %v", err)
	}
	// What goes on.
	if r, err := c.Get(ctx, "k/", clientv3.WithPrefix(), clientv3.WithKeysOnly()); err != nil || len(r.Kvs) != 8 {
		t.Errorf("get: %v, %v", r, err)
	}
	if r, err := c.Delete(ctx, "k/0"); err != nil || r.Deleted != 1 {
		t.Errorf("delete: %v, %v", r, err)
	}
	if r, err := c.Txn(ctx).Then(clientv3.OpDelete("k/1"), clientv3.OpGet("k/2")).Commit(); err != nil || !r.Succeeded {
		t.Errorf("txn of a delete and a get: %v, %v", r, err)
	}
	if _, err := c.Revoke(ctx, lease.ID); err != nil {
		t.Errorf("lease revoke: %v", err)
	}
	if _, err := c.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Errorf("compact: %v", err)
	}
	if _, err := c.Defragment(ctx, addr); err != nil {
		t.Errorf("defragment: %v", err)
	}
	snap, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, snap); err != nil || n == 0 {
		t.Errorf("snapshot: %d bytes, %v", n, err)
	}
	snap.Close()

	base := "http://" + addr
	for _, tt := range []struct{ path, body string }{
		{"/health", `{"health":"false","reason":"ALARM NOSPACE"}` + "\n"},
		{"/health?exclude=NOSPACE", `{"health":"true","reason":""}`},
		{"/health?exclude=CORRUPT", `{"health":"false","reason":"ALARM NOSPACE"}` + "\n"},
		{"/livez", "ok\n"},
		{"/readyz", "ok\n"},
	} {
		a := httpDo(t, "GET", base+tt.path, "")
		wantStatus := http.StatusOK
		if tt.body[0] == '{' && tt.body != `{"health":"true","reason":""}` {
			wantStatus = http.StatusServiceUnavailable
		}
		if a.status != wantStatus || a.body != tt.body {
			t.Errorf("GET %s: %d %q, want %d %q", tt.path, a.status, a.body, wantStatus, tt.body)
		}
	}
	m := scrape(t, s)
	if q := m.Sum("etcd_server_quota_backend_bytes"); q != quota {
		t.Errorf("etcd_server_quota_backend_bytes = %v, want %d", q, quota)
	}
	if size := m.Sum("etcd_mvcc_db_total_size_in_bytes"); size <= 0 {
		t.Errorf("etcd_mvcc_db_total_size_in_bytes = %v", size)
	}

	if _, err := c.Delete(ctx, "k/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	cr, err := c.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, cr.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Defragment(ctx, addr); err != nil {
		t.Fatal(err)
	}
	if st, err = c.Status(ctx, addr); err != nil || st.DbSize >= quota-64<<10 {
		t.Fatalf("after deleting everything, compacting and defragmenting: %d bytes (quota %d), %v", st.DbSize, quota, err)
	}
	if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Put(ctx, fmt.Sprintf("after/%d", i), "v"); err != nil {
			t.Fatalf("put after the cause was gone and the alarm disarmed: %v", err)
		}
		time.Sleep(spaceSampleInterval)
	}
	waitAlarms(t, c)
	if a := httpDo(t, "GET", base+"/health", ""); a.status != http.StatusOK {
		t.Errorf("/health after the disarm: %+v", a)
	}
}

// TestAlarmPersists: a NOSPACE alarm is kept across restarts (etcd keeps
// it in its alarm bucket): with the quota raised, puts are still refused
// until the alarm is disarmed, and then succeed.
func TestAlarmPersists(t *testing.T) {
	const quota = 2 << 20
	cfg := testConfig(t)
	cfg.Server.QuotaBackendBytes = quota
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	if err := fillPastQuota(t, c, s, quota); !isNoSpace(err) {
		t.Fatalf("put past the quota: %v", err)
	}
	st, err := c.Status(testCtx(t), s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	nospace := &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}
	waitAlarms(t, c, nospace)
	closeNow(t, s)

	cfg.Server.QuotaBackendBytes = 1 << 30
	s = startAgain(t, cfg)
	c = newClient(t, s, nil)
	ctx := testCtx(t)
	if r, err := c.AlarmList(ctx); err != nil || fmt.Sprint(r.Alarms) != fmt.Sprint([]*pb.AlarmMember{nospace}) {
		t.Fatalf("alarms after a restart: %v, %v", r, err)
	}
	if _, err := c.Put(ctx, "k", "v"); !isNoSpace(err) {
		t.Errorf("put with the alarm kept over a restart and the quota raised: %v", err)
	}
	if a := httpDo(t, "GET", "http://"+s.Addr().String()+"/health", ""); a.status != http.StatusServiceUnavailable {
		t.Errorf("/health after the restart: %+v", a)
	}
	if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Errorf("put after the disarm: %v", err)
	}
	closeNow(t, s)
	s = startAgain(t, cfg)
	c = newClient(t, s, nil)
	waitAlarms(t, c)
	if _, err := c.Put(testCtx(t), "k", "v"); err != nil {
		t.Errorf("put after a restart following the disarm: %v", err)
	}
}

// TestMinFreeDisk: a file system below min_free_disk_bytes raises the
// NOSPACE alarm at the first write, whatever the quota; once the floor is
// met (here: lowered, with a restart), a disarm lets puts through.
func TestMinFreeDisk(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MinFreeDiskBytes = 1 << 62 // more than any disk has
	s := startServer(t, cfg)
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	if _, err := c.Put(ctx, "k", "v"); !isNoSpace(err) {
		t.Fatalf("put with the disk under the floor: %v", err)
	}
	if r, err := c.Get(ctx, "k"); err != nil || len(r.Kvs) != 0 {
		t.Errorf("get: %v, %v", r, err)
	}
	st, err := c.Status(ctx, s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	waitAlarms(t, c, &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE})
	closeNow(t, s)

	cfg.Server.MinFreeDiskBytes = 0
	s = startAgain(t, cfg)
	c = newClient(t, s, nil)
	if _, err := c.Put(ctx, "k", "v"); !isNoSpace(err) {
		t.Errorf("put before the disarm: %v", err)
	}
	if _, err := c.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Errorf("put after the disarm: %v", err)
	}
}

// TestSpaceCosts checks etcd's quota costs: a put is its key and value
// and 256 bytes, a txn its costlier branch, nested txns included; a txn
// without puts costs nothing (and so always passes).
func TestSpaceCosts(t *testing.T) {
	put := func(k, v string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k), Value: []byte(v)}}}
	}
	del := &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: []byte("k")}}}
	nested := &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: []*pb.RequestOp{put("a", "bb")}}}}
	for _, tt := range []struct {
		name string
		txn  *pb.TxnRequest
		want int64
	}{
		{"empty", &pb.TxnRequest{}, 0},
		{"delete", &pb.TxnRequest{Success: []*pb.RequestOp{del}}, 0},
		{"put", &pb.TxnRequest{Success: []*pb.RequestOp{put("k", "v")}}, 258},
		{"costlier branch", &pb.TxnRequest{Success: []*pb.RequestOp{put("k", "v")}, Failure: []*pb.RequestOp{put("k", "vvv"), del}}, 260},
		{"nested", &pb.TxnRequest{Failure: []*pb.RequestOp{nested, put("k", "v")}}, 259 + 258},
	} {
		if got := txnCost(tt.txn); got != tt.want {
			t.Errorf("%s: txnCost = %d, want %d", tt.name, got, tt.want)
		}
		if got := txnPuts(tt.txn); got != (tt.want > 0) {
			t.Errorf("%s: txnPuts = %v", tt.name, got)
		}
	}
}
