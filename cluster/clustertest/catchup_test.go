package clustertest

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRestartedMemberAnswersCaughtUp: a member killed while the others
// took a thousand writes answers, once restarted, nothing older than what
// was acknowledged before it returned: not its Status, not a serializable
// read. etcd serves clients only after its restart published through raft;
// answering from the state the member died with made revisions go back
// (etcd's robustness traffic asserts they do not).
func TestRestartedMemberAnswersCaughtUp(t *testing.T) {
	c := newProcCluster(t, 3, 100000)
	lead := c.leader()
	var down *member
	for _, m := range c.members {
		if m != lead {
			down = m
			break
		}
	}
	c.kill(down)
	w := startWriters(c.client(lead), 8, "catchup/")
	deadline := time.Now().Add(time.Minute)
	for w.count() < 1000 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(w.stop)
	w.wg.Wait()
	if n := w.count(); n < 1000 {
		t.Fatalf("%d writes acknowledged in a minute, want 1000", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acked, err := c.client(lead).Get(ctx, "catchup/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	want := acked.Header.Revision

	c.start(down)
	cli := c.client(down)
	st, err := cli.Status(ctx, down.clientAddr)
	if err != nil {
		t.Fatal(err)
	}
	if st.Header.Revision < want {
		t.Errorf("restarted member's Status: revision %d, older than the %d acknowledged before it returned", st.Header.Revision, want)
	}
	r, err := cli.Get(ctx, "catchup/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if err != nil {
		t.Fatal(err)
	}
	if r.Header.Revision < want || r.Count < acked.Count {
		t.Errorf("restarted member's serializable read: revision %d with %d keys, older than revision %d with %d keys acknowledged before it returned",
			r.Header.Revision, r.Count, want, acked.Count)
	}
}
