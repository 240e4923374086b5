package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestJoinWithEtcdctl runs etcd's runbooks for growing and repairing a
// cluster with stock etcdctl (v3 API) against three `strata etcd`
// members, while a writer puts keys throughout:
//
//  1. `etcdctl member add s4 --learner --peer-urls=...`; s4 starts with
//     `--initial-cluster-state existing` and the ETCD_* lines etcdctl
//     printed, pasted into its environment as an operator does. The
//     cluster's --snapshot-count is small, so the log was truncated long
//     before s4 asked for it: s4 catches up from a snapshot (the sender's
//     log and s4's say so). `etcdctl member promote` is retried until the
//     learner is in sync, as etcd refuses it before.
//  2. etcd's "replacing a failed member": s2 is killed, `etcdctl member
//     remove`d, added again under the same name and URLs (`member add`,
//     a new member ID) and started with an empty data dir and
//     `--initial-cluster-state existing`; it too catches up from a
//     snapshot.
//
// `member list`, `endpoint health`, `endpoint status` and `endpoint hashkv --rev` (equal
// hashes on every member at one revision) are checked along the way, and
// at the end every acknowledged put is read back from every member.
// Skipped without etcdctl; about 10 s.
func TestJoinWithEtcdctl(t *testing.T) {
	etcdctl, err := exec.LookPath("etcdctl")
	if err != nil {
		t.Skip("etcdctl not installed")
	}
	jc := &joinCluster{t: t, dir: t.TempDir(), etcdctl: etcdctl}
	t.Cleanup(jc.stop)
	for i := range 3 {
		jc.members = append(jc.members, jc.newMember(fmt.Sprintf("s%d", i+1)))
	}
	var initial []string
	for _, m := range jc.members {
		initial = append(initial, m.name+"=http://"+m.peer)
	}
	var wg sync.WaitGroup
	for _, m := range jc.members {
		m.flags = append(m.flags, "--name="+m.name, "--initial-advertise-peer-urls=http://"+m.peer,
			"--initial-cluster="+strings.Join(initial, ","), "--initial-cluster-state=new", "--initial-cluster-token=join-test")
		wg.Go(func() { jc.start(m, nil) })
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	jc.waitMembers(3)

	wcli, err := clientv3.New(clientv3.Config{Endpoints: jc.endpoints(jc.members...), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer wcli.Close()
	w := startWriters(wcli, 1, "join/")
	defer w.finish()
	w.waitFor(t, 500, 30*time.Second)

	// 1. A learner joins, catches up from a snapshot, is promoted.
	s4 := jc.newMember("s4")
	jc.members = append(jc.members, s4)
	env := jc.memberAdd(s4, true)
	if got := env["ETCD_INITIAL_CLUSTER_STATE"]; got != "existing" {
		t.Fatalf("etcdctl member add printed ETCD_INITIAL_CLUSTER_STATE=%q, want existing", got)
	}
	list := jc.memberList()
	if e := list["s4"]; e == nil || e.started || !e.learner {
		t.Fatalf("after member add --learner, member list has s4 as %+v; want unstarted learner", e)
	}
	jc.start(s4, env)
	w.waitFor(t, w.count()+300, 30*time.Second)
	id := jc.memberList()["s4"].id
	jc.promote(id)
	if e := jc.memberList()["s4"]; e == nil || !e.started || e.learner {
		t.Fatalf("after member promote, member list has s4 as %+v; want a started voter", e)
	}
	jc.checkSnapshot(s4, id)
	jc.checkStatus()
	jc.checkHashKV()

	// 2. Replace a failed member: s2 dies, is removed, added again under
	// its name with an empty data dir.
	s2 := jc.members[1]
	oldID := jc.memberList()["s2"].id
	jc.kill(s2)
	w.waitFor(t, w.count()+200, 30*time.Second)
	jc.ctl(jc.live(), "member", "remove", strconv.FormatUint(oldID, 16))
	if e := jc.memberList()["s2"]; e != nil {
		t.Fatalf("after member remove, member list still has s2: %+v", e)
	}
	if err := os.RemoveAll(s2.dataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(s2.logPath, strings.TrimSuffix(s2.logPath, ".log")+"-removed.log"); err != nil {
		t.Fatal(err)
	}
	// The new s2 starts from etcdctl's lines, not its old flags.
	s2.flags = s2.baseFlags()
	env = jc.memberAdd(s2, false)
	jc.start(s2, env)
	w.waitFor(t, w.count()+300, 30*time.Second)
	list = jc.memberList()
	if len(list) != 4 {
		t.Fatalf("member list has %d members, want 4: %v", len(list), list)
	}
	if e := list["s2"]; e == nil || e.id == oldID || e.learner || !e.started {
		t.Fatalf("the replaced s2 is %+v in member list; want a started voter with an ID other than %x", e, oldID)
	}
	jc.checkSnapshot(s2, list["s2"].id)
	jc.checkStatus()
	jc.checkHashKV()

	jc.t.Logf("etcdctl member list:\n%s", jc.ctl(jc.live(), "member", "list"))
	acked := w.finish()
	t.Logf("%d puts acknowledged, %d failed", len(acked), w.fails.Load())
	for _, m := range jc.members {
		jc.checkAcked(m, "join/", acked)
	}
	jc.checkHashKV()
}

// checkSnapshot checks m caught up from a snapshot: a member's log says
// it sent one to m's ID, and m's log that it received it.
func (jc *joinCluster) checkSnapshot(m *joinMember, id uint64) {
	jc.t.Helper()
	if !m.logHas("received snapshot at index") {
		jc.t.Errorf("%s caught up without a snapshot (--snapshot-count=%d): its log lacks \"received snapshot at index\"\n%s", m.name, joinSnapshotCount, tail(m.logPath, 40))
	}
	sent := fmt.Sprintf("sent to peer %x", id)
	for _, o := range jc.members {
		if o != m && o.logHas(sent) {
			return
		}
	}
	jc.t.Errorf("no member's log says a snapshot was %s (%s)", sent, m.name)
}

// joinSnapshotCount is the members' --snapshot-count: small, so that the
// log is truncated far behind a member that joins.
const joinSnapshotCount = 100

// joinMember is one `strata etcd` process, started from etcd's flags.
type joinMember struct {
	name, peer, client string
	dataDir, logPath   string
	flags              []string

	cmd    *exec.Cmd
	exited chan struct{}
}

func (m *joinMember) logHas(s string) bool {
	b, err := os.ReadFile(m.logPath)
	return err == nil && strings.Contains(string(b), s)
}

type joinCluster struct {
	t       *testing.T
	dir     string
	etcdctl string
	members []*joinMember
}

// newMember picks a member's addresses and its flags other than the
// cluster ones (those come from the test or from etcdctl's ETCD_* lines).
func (jc *joinCluster) newMember(name string) *joinMember {
	m := &joinMember{name: name, peer: freeAddr(jc.t), client: freeAddr(jc.t),
		dataDir: filepath.Join(jc.dir, name), logPath: filepath.Join(jc.dir, name+".log")}
	m.flags = m.baseFlags()
	return m
}

// baseFlags are m's flags other than the cluster ones.
func (m *joinMember) baseFlags() []string {
	return []string{
		"--data-dir=" + m.dataDir,
		"--listen-client-urls=http://" + m.client,
		"--advertise-client-urls=http://" + m.client,
		"--listen-peer-urls=http://" + m.peer,
		"--heartbeat-interval=50",
		"--election-timeout=500",
		"--snapshot-count=" + strconv.Itoa(joinSnapshotCount),
		// debug logs the cluster's events: the snapshot s4 receives.
		"--log-level=debug",
	}
}

// start starts m as `strata etcd` with its flags and env (ETCD_NAME=...,
// as etcdctl printed them) and waits until it serves.
func (jc *joinCluster) start(m *joinMember, env map[string]string) {
	jc.t.Helper()
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		jc.t.Error(err)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=etcd\n"+strings.Join(m.flags, "\n"))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		logf.Close()
		jc.t.Error(err)
		return
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	served := make(chan struct{}, 1)
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(logf, "stdout: "+sc.Text())
			if servingLine.MatchString(sc.Text()) {
				served <- struct{}{}
			}
		}
		_ = cmd.Wait()
		close(m.exited)
	}()
	select {
	case <-served:
	case <-m.exited:
		jc.t.Errorf("%s exited before serving; its log:\n%s", m.name, tail(m.logPath, 30))
	case <-time.After(30 * time.Second):
		jc.t.Errorf("%s did not serve within 30s; its log:\n%s", m.name, tail(m.logPath, 30))
	}
}

func (jc *joinCluster) kill(m *joinMember) {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.exited
	m.cmd = nil
}

func (jc *joinCluster) stop() {
	for _, m := range jc.members {
		jc.kill(m)
	}
	if jc.t.Failed() {
		for _, m := range jc.members {
			jc.t.Logf("---- %s (%s) ----\n%s", m.name, m.logPath, tail(m.logPath, 40))
		}
	}
}

// live returns the running members.
func (jc *joinCluster) live() []*joinMember {
	var out []*joinMember
	for _, m := range jc.members {
		if m.cmd != nil {
			out = append(out, m)
		}
	}
	return out
}

func (jc *joinCluster) endpoints(ms ...*joinMember) []string {
	var eps []string
	for _, m := range ms {
		eps = append(eps, m.client)
	}
	return eps
}

// ctl runs etcdctl against ms and returns its stdout.
func (jc *joinCluster) ctl(ms []*joinMember, args ...string) string {
	jc.t.Helper()
	args = append([]string{"--endpoints=" + strings.Join(jc.endpoints(ms...), ","), "--command-timeout=10s"}, args...)
	cmd := exec.Command(jc.etcdctl, args...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		jc.t.Fatalf("etcdctl %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// memberAdd runs `etcdctl member add NAME [--learner] --peer-urls=...`
// and returns the ETCD_* lines it printed for the new member's
// environment, unquoted.
func (jc *joinCluster) memberAdd(m *joinMember, learner bool) map[string]string {
	jc.t.Helper()
	args := []string{"member", "add", m.name, "--peer-urls=http://" + m.peer}
	if learner {
		args = append(args, "--learner")
	}
	out := jc.ctl(jc.live(), args...)
	jc.t.Logf("etcdctl %s:\n%s", strings.Join(args, " "), out)
	env := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && strings.HasPrefix(k, "ETCD_") {
			env[k] = strings.Trim(v, `"`)
		}
	}
	for _, k := range []string{"ETCD_NAME", "ETCD_INITIAL_CLUSTER", "ETCD_INITIAL_ADVERTISE_PEER_URLS", "ETCD_INITIAL_CLUSTER_STATE"} {
		if env[k] == "" {
			jc.t.Fatalf("etcdctl member add printed no %s:\n%s", k, out)
		}
	}
	if env["ETCD_NAME"] != m.name || !strings.Contains(env["ETCD_INITIAL_CLUSTER"], m.name+"=http://"+m.peer) {
		jc.t.Fatalf("etcdctl member add printed %v for %s at %s", env, m.name, m.peer)
	}
	return env
}

type listEntry struct {
	id               uint64
	started, learner bool
	peer, client     string
}

// memberList parses `etcdctl member list` (id, status, name, peer addrs,
// client addrs, is learner), keyed by name; an unstarted member has none
// yet and is keyed by the name of the test's member with its peer URL.
func (jc *joinCluster) memberList() map[string]*listEntry {
	jc.t.Helper()
	out := jc.ctl(jc.live(), "member", "list")
	list := map[string]*listEntry{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, ", ")
		if len(f) != 6 {
			jc.t.Fatalf("etcdctl member list: line %q does not have 6 fields", line)
		}
		id, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			jc.t.Fatalf("etcdctl member list: line %q: %v", line, err)
		}
		e := &listEntry{id: id, started: f[1] == "started", peer: f[3], client: f[4], learner: f[5] == "true"}
		name := f[2]
		if name == "" {
			for _, m := range jc.members {
				if "http://"+m.peer == e.peer {
					name = m.name
				}
			}
		}
		list[name] = e
	}
	return list
}

// promote runs `etcdctl member promote ID` until the learner is in sync
// and the promotion goes through, as an operator retries it.
func (jc *joinCluster) promote(id uint64) {
	jc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command(jc.etcdctl, "--endpoints="+strings.Join(jc.endpoints(jc.live()...), ","), "member", "promote", strconv.FormatUint(id, 16))
		out, err := cmd.CombinedOutput()
		if err == nil {
			return
		}
		if !strings.Contains(string(out), "can only promote a learner member which is in sync with leader") {
			jc.t.Fatalf("etcdctl member promote %x: %v\n%s", id, err, out)
		}
		if time.Now().After(deadline) {
			jc.t.Fatalf("etcdctl member promote %x: the learner was not in sync within 30s: %s", id, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitMembers waits until etcdctl member list shows n started members.
func (jc *joinCluster) waitMembers(n int) {
	jc.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		started := 0
		for _, e := range jc.memberList() {
			if e.started {
				started++
			}
		}
		if started == n {
			return
		}
		if time.Now().After(deadline) {
			jc.t.Fatalf("member list shows %d started members after 20s, want %d", started, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkStatus runs `etcdctl endpoint health` and `endpoint status` on
// every running member: all are healthy and name the same leader, one of
// them is it, none is a learner.
func (jc *joinCluster) checkStatus() {
	jc.t.Helper()
	var st []struct {
		Endpoint string
		Status   struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
			}
			Leader    uint64
			RaftIndex uint64
			DBSize    int64 `json:"dbSize"`
			IsLearner bool
		}
	}
	jc.ctl(jc.live(), "endpoint", "health")
	out := jc.ctl(jc.live(), "endpoint", "status", "-w", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		jc.t.Fatalf("etcdctl endpoint status -w json: %v\n%s", err, out)
	}
	if len(st) != len(jc.live()) {
		jc.t.Fatalf("endpoint status answered for %d endpoints, want %d:\n%s", len(st), len(jc.live()), out)
	}
	leaders := 0
	for _, s := range st {
		if s.Status.Leader == 0 || s.Status.Leader != st[0].Status.Leader || s.Status.IsLearner || s.Status.DBSize <= 0 {
			jc.t.Fatalf("endpoint status: %s has leader %x (first endpoint: %x), learner %v, db size %d:\n%s",
				s.Endpoint, s.Status.Leader, st[0].Status.Leader, s.Status.IsLearner, s.Status.DBSize, out)
		}
		if s.Status.Leader == s.Status.Header.MemberID {
			leaders++
		}
	}
	if leaders != 1 {
		jc.t.Fatalf("endpoint status: %d members say they lead, want 1:\n%s", leaders, out)
	}
}

// checkHashKV runs `etcdctl endpoint hashkv --rev R` on every running
// member at a revision R all have applied: the hashes must be equal.
func (jc *joinCluster) checkHashKV() {
	jc.t.Helper()
	var st []struct {
		Status struct {
			Header struct{ Revision int64 }
		}
	}
	out := jc.ctl(jc.live(), "endpoint", "status", "-w", "json")
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		jc.t.Fatalf("etcdctl endpoint status -w json: %v\n%s", err, out)
	}
	rev := st[0].Status.Header.Revision
	for _, s := range st {
		rev = min(rev, s.Status.Header.Revision)
	}
	var hs []struct {
		Endpoint string
		HashKV   struct {
			Header struct{ Revision int64 }
			Hash   uint32
		}
	}
	out = jc.ctl(jc.live(), "endpoint", "hashkv", "--rev="+strconv.FormatInt(rev, 10), "-w", "json")
	if err := json.Unmarshal([]byte(out), &hs); err != nil {
		jc.t.Fatalf("etcdctl endpoint hashkv -w json: %v\n%s", err, out)
	}
	if len(hs) != len(jc.live()) {
		jc.t.Fatalf("endpoint hashkv answered for %d endpoints, want %d:\n%s", len(hs), len(jc.live()), out)
	}
	for _, h := range hs[1:] {
		if h.HashKV.Hash != hs[0].HashKV.Hash {
			jc.t.Fatalf("endpoint hashkv --rev=%d: %s has %d, %s has %d:\n%s", rev, hs[0].Endpoint, hs[0].HashKV.Hash, h.Endpoint, h.HashKV.Hash, out)
		}
	}
	jc.t.Logf("endpoint hashkv --rev=%d: %d on all %d members", rev, hs[0].HashKV.Hash, len(hs))
}

// checkAcked reads prefix from m alone and checks every acknowledged put
// is there with its value.
func (jc *joinCluster) checkAcked(m *joinMember, prefix string, acked []string) {
	jc.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		jc.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		jc.t.Fatalf("get %s* on %s: %v", prefix, m.name, err)
	}
	got := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	missing := 0
	for _, k := range acked {
		if got[k] != k {
			if missing < 5 {
				jc.t.Errorf("%s: acknowledged put %s reads %q", m.name, k, got[k])
			}
			missing++
		}
	}
	if missing > 0 {
		jc.t.Fatalf("%s: %d of %d acknowledged puts missing", m.name, missing, len(acked))
	}
}
