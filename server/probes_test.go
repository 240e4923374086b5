package server

import (
	"context"
	"net/http"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/stratadb/strata/cluster"
)

// probe is one GET of a health endpoint and the answer expected.
type probe struct {
	path   string
	status int
	body   string
}

func checkProbes(t *testing.T, s *Server, probes []probe) {
	t.Helper()
	base := "http://" + s.Addr().String()
	for _, p := range probes {
		a := httpDo(t, "GET", base+p.path, "")
		if a.status != p.status || a.body != p.body || a.contentType != "text/plain; charset=utf-8" {
			t.Errorf("GET %s: %d %q (%s)\nwant %d %q", p.path, a.status, a.body, a.contentType, p.status, p.body)
		}
	}
}

const readyzVerbose = "[+]data_corruption ok\n[+]disk_stall ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\n"

// TestProbes checks /livez and /readyz as etcd 3.6+ serves them: "ok\n",
// the checks listed with ?verbose, one check by its path, ?exclude, 405
// for another method; a CORRUPT alarm fails readyz's data_corruption
// (and /health, unless excluded) but not livez.
func TestProbes(t *testing.T) {
	s := startServer(t, testConfig(t))
	checkProbes(t, s, []probe{
		{"/livez", 200, "ok\n"},
		{"/livez?verbose", 200, "[+]serializable_read ok\nok\n"},
		{"/livez/serializable_read", 200, "ok\n"},
		{"/readyz", 200, "ok\n"},
		{"/readyz?verbose", 200, readyzVerbose + "ok\n"},
		{"/readyz?verbose&exclude=non_learner&exclude=no_such_check", 200,
			"[+]data_corruption ok\n[+]disk_stall ok\n[+]serializable_read ok\n[+]linearizable_read ok\nok\n"},
		{"/readyz/linearizable_read?verbose", 200, "[+]linearizable_read ok\nok\n"},
		{"/readyz/non_learner", 200, "ok\n"},
	})
	if a := httpDo(t, "POST", "http://"+s.Addr().String()+"/readyz", ""); a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST /readyz: %+v", a)
	}

	c := newClient(t, s, nil)
	st, err := c.Status(testCtx(t), s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	corrupt := &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_CORRUPT}
	if _, err := pb.NewMaintenanceClient(c.ActiveConnection()).Alarm(testCtx(t),
		&pb.AlarmRequest{Action: pb.AlarmRequest_ACTIVATE, MemberID: corrupt.MemberID, Alarm: corrupt.Alarm}); err != nil {
		t.Fatal(err)
	}
	waitAlarms(t, c, corrupt)
	checkProbes(t, s, []probe{
		{"/readyz", 503, "[-]data_corruption failed: alarm activated: CORRUPT\n[+]disk_stall ok\n[+]serializable_read ok\n[+]linearizable_read ok\n[+]non_learner ok\n\n"},
		{"/readyz/data_corruption", 503, "[-]data_corruption failed: alarm activated: CORRUPT\n\n"},
		{"/readyz?exclude=data_corruption", 200, "ok\n"},
		{"/livez", 200, "ok\n"},
		{"/health", 503, `{"health":"false","reason":"ALARM CORRUPT"}` + "\n"},
		{"/health?exclude=CORRUPT", 200, `{"health":"true","reason":""}`},
	})
	m := scrape(t, s)
	if got := m.Sum("etcd_server_healthchecks_total", "type", "readyz", "name", "data_corruption", "status", "error"); got != 2 {
		t.Errorf("etcd_server_healthchecks_total{readyz,data_corruption,error} = %v, want 2", got)
	}
	if got := m.Sum("etcd_server_health_failures"); got != 1 {
		t.Errorf("etcd_server_health_failures = %v, want 1", got)
	}
}

// TestProbesNoLeader: without a leader readyz's linearizable read fails
// (etcd's "no leader") and /health says RAFT NO LEADER, while livez and
// /health?serializable=true pass.
func TestProbesNoLeader(t *testing.T) {
	s, err := Start(testConfig(t), Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID})
		return leaderlessNode{n}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	checkProbes(t, s, []probe{
		{"/livez", 200, "ok\n"},
		{"/readyz", 503, "[+]data_corruption ok\n[+]disk_stall ok\n[+]serializable_read ok\n[-]linearizable_read failed: etcdserver: no leader\n[+]non_learner ok\n\n"},
		{"/readyz?exclude=linearizable_read", 200, "ok\n"},
		{"/health", 503, `{"health":"false","reason":"RAFT NO LEADER"}` + "\n"},
		{"/health?serializable=true", 200, `{"health":"true","reason":""}`},
	})
}

// barrierlessNode is a member whose read barrier never passes: it has not
// caught up with the cluster since it started.
type barrierlessNode struct{ cluster.Node }

func (barrierlessNode) ReadBarrier(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestProbesNotCaughtUp: a member that has not caught up with the
// cluster (ready.go holds its clients' requests) fails readyz's reads,
// and is live.
func TestProbesNotCaughtUp(t *testing.T) {
	s, err := Start(testConfig(t), Options{NewNode: func(sm cluster.StateMachine, ids IDs) (cluster.Node, error) {
		n, err := cluster.NewLocal(sm, cluster.LocalConfig{ClusterID: ids.ClusterID, MemberID: ids.MemberID})
		return barrierlessNode{n}, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	const notCaughtUp = "failed: etcdserver: member has not caught up with the cluster yet\n"
	checkProbes(t, s, []probe{
		{"/livez", 200, "ok\n"},
		{"/readyz", 503, "[+]data_corruption ok\n[+]disk_stall ok\n[-]serializable_read " + notCaughtUp + "[-]linearizable_read " + notCaughtUp + "[+]non_learner ok\n\n"},
	})
}
