package clustertest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// setQuota gives m's config quota_backend_bytes = quota.
func setQuota(t *testing.T, m *member, quota int64) {
	t.Helper()
	b, err := os.ReadFile(m.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if i := strings.Index(text, "quota_backend_bytes = "); i >= 0 {
		text = text[:i] + text[i+strings.Index(text[i:], "\n")+1:]
	}
	text = strings.Replace(text, "[server]\n", fmt.Sprintf("[server]\nquota_backend_bytes = %d\n", quota), 1)
	if err := os.WriteFile(m.cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitAlarmsEverywhere waits up to 10 s for every member to list want.
func waitAlarmsEverywhere(t *testing.T, c *procCluster, want ...*pb.AlarmMember) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, m := range c.members {
		cli := c.client(m)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := cli.AlarmList(ctx)
			cancel()
			if err == nil && fmt.Sprint(resp.Alarms) == fmt.Sprint(want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: alarms %v (%v), want %v", m.name, resp, err, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestNoSpaceAlarmReplicated: the NOSPACE alarm goes through raft as
// etcd's does. Only s3 has a small quota_backend_bytes; writes through s1
// (whose own quota is far) grow s3's database as s3 applies them, s3
// raises its alarm, and every member lists it, answers /health with
// "ALARM NOSPACE" and refuses puts; a disarm while s3 is still over its
// quota is followed by the alarm again; with s3's quota raised (a
// restart) a disarm clears it on every member and puts work.
func TestNoSpaceAlarmReplicated(t *testing.T) {
	const quota = 8 << 20
	c := newPreparedCluster(t, 3, 100, func(m *member) {
		if m.name == "s3" {
			setQuota(t, m, quota)
		}
	})
	c.leader()
	s1, s3 := c.members[0], c.members[2]
	cli := c.client(s1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := c.client(s3).Status(ctx, s3.clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	alarm := &pb.AlarmMember{MemberID: st.Header.MemberId, Alarm: pb.AlarmType_NOSPACE}
	value := make([]byte, 64<<10)
	var putErr error
	for i := range 2000 {
		if _, err := rand.Read(value); err != nil {
			t.Fatal(err)
		}
		if _, putErr = cli.Put(ctx, fmt.Sprintf("k/%d", i%8), string(value)); putErr != nil {
			break
		}
	}
	if !errors.Is(putErr, rpctypes.ErrNoSpace) {
		t.Fatalf("puts through s1 with s3 over its quota: %v, want %v", putErr, rpctypes.ErrNoSpace)
	}
	waitAlarmsEverywhere(t, c, alarm)
	for _, m := range c.members {
		if _, err := c.client(m).Put(ctx, "small", "v"); !errors.Is(err, rpctypes.ErrNoSpace) {
			t.Errorf("put through %s with the alarm raised: %v", m.name, err)
		}
		resp, err := http.Get("http://" + m.clientAddr + "/health")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"reason":"ALARM NOSPACE"`) {
			t.Errorf("%s /health: %d %s", m.name, resp.StatusCode, body)
		}
		if _, err := c.client(m).Get(ctx, "k/0"); err != nil {
			t.Errorf("get through %s: %v", m.name, err)
		}
	}
	if !s3.logHas("alarm NOSPACE raised by member") {
		t.Error("s3 logged no line for the alarm")
	}

	// Disarmed with s3 still over its quota: s3 raises it again.
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	waitAlarmsEverywhere(t, c, alarm)

	// s3's quota raised: a disarm clears it for good.
	c.kill(s3)
	setQuota(t, s3, 1<<30)
	c.start(s3)
	c.leader()
	waitAlarmsEverywhere(t, c, alarm) // kept across the restart
	if _, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{}); err != nil {
		t.Fatal(err)
	}
	waitAlarmsEverywhere(t, c)
	for _, m := range c.members {
		if _, err := c.client(m).Put(ctx, "after/"+m.name, "v"); err != nil {
			t.Errorf("put through %s after the disarm: %v", m.name, err)
		}
	}
	if !s3.logHas("alarm NOSPACE of member") {
		t.Error("s3 logged no line for the disarm")
	}
}
