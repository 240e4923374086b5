package server

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestEtcdctlAlarm drives the quota with the stock etcdctl: past the
// quota (filled with clientv3, faster) a put fails with etcd's message,
// `alarm list` shows the member's NOSPACE, reads, deletes, compaction,
// defragmentation and `snapshot save` work, and once they took the
// database under the quota `alarm disarm` clears it and puts work.
// (etcdctl 3.4's `endpoint health` does not look at alarms; 3.5's does,
// through the same Alarm call.)
func TestEtcdctlAlarm(t *testing.T) {
	bin, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl not installed (apt-get install etcd-client)")
	}
	const quota = 8 << 20
	cfg := testConfig(t)
	cfg.Server.QuotaBackendBytes = quota
	s := startServer(t, cfg)
	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--endpoints=http://" + s.Addr().String()}, args...)...)
		cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(stdin string, args ...string) string {
		t.Helper()
		out, err := run(stdin, args...)
		if err != nil {
			t.Fatalf("etcdctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	c := newClient(t, s, nil)
	if err := fillPastQuota(t, c, s, quota); !isNoSpace(err) {
		t.Fatalf("put past the quota: %v", err)
	}
	st, err := c.Status(testCtx(t), s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	waitAlarms(t, c, &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE})
	want := fmt.Sprintf("memberID:%d alarm:NOSPACE", st.Header.MemberId)
	if out := must("", "alarm", "list"); !strings.Contains(out, want) {
		t.Errorf("alarm list: %q, want %q", out, want)
	}
	if out, err := run("", "put", "small", "v"); err == nil || !strings.Contains(out, "database space exceeded") {
		t.Errorf("put with the alarm: %v\n%s", err, out)
	}
	if out := must("", "get", "k/", "--prefix", "--keys-only"); !strings.Contains(out, "k/3") {
		t.Errorf("get: %q", out)
	}
	if out := must("", "del", "k/", "--prefix"); strings.TrimSpace(out) != "8" {
		t.Errorf("del: %q", out)
	}
	rev := must("", "get", "x", "-w", "fields")
	i := strings.Index(rev, `"Revision" : `)
	if i < 0 {
		t.Fatalf("get -w fields: %q", rev)
	}
	n, err := strconv.Atoi(strings.Fields(rev[i+len(`"Revision" : `):])[0])
	if err != nil {
		t.Fatal(err)
	}
	must("", "compact", strconv.Itoa(n), "--physical")
	must("", "defrag")
	must("", "snapshot", "save", filepath.Join(t.TempDir(), "snap.db"))
	if out := must("", "alarm", "disarm"); !strings.Contains(out, want) {
		t.Errorf("alarm disarm: %q, want %q", out, want)
	}
	if out := must("", "put", "small", "v"); !strings.Contains(out, "OK") {
		t.Errorf("put after the disarm: %q", out)
	}
	if out := must("", "alarm", "list"); strings.TrimSpace(out) != "" {
		t.Errorf("alarm list after the disarm: %q", out)
	}
}
