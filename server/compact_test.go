package server

import (
	"fmt"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// waitCounter is the server's raftKV, counting the waits for the local
// compaction.
type waitCounter struct {
	*Server
	waits int
}

func (w *waitCounter) waitCompaction() error {
	w.waits++
	return w.Server.waitCompaction()
}

// TestPhysicalCompactionWaits: the apply path leaves a compaction's
// deletions running (mvcc.Entry.Compact), so Compact waits for them only
// when the request asks for a physical compaction, as etcd's does.
func TestPhysicalCompactionWaits(t *testing.T) {
	s := startServer(t, testConfig(t))
	c := newClient(t, s, nil)
	ctx := testCtx(t)
	w := &waitCounter{Server: s}
	kv := &kvServer{kv: w, auth: s.auth, hdr: s.header(), maxTxnOps: int(s.cfg.Server.MaxTxnOps)}
	for _, physical := range []bool{false, true} {
		var rev int64
		for i := range 20 {
			resp, err := c.Put(ctx, "k", fmt.Sprint(i))
			if err != nil {
				t.Fatal(err)
			}
			rev = resp.Header.Revision
		}
		before := w.waits
		resp, err := kv.Compact(ctx, &pb.CompactionRequest{Revision: rev, Physical: physical})
		if err != nil {
			t.Fatalf("Compact(%d, physical %v): %v", rev, physical, err)
		}
		if resp.Header.Revision < rev {
			t.Errorf("Compact(%d): header revision %d", rev, resp.Header.Revision)
		}
		want := 0
		if physical {
			want = 1
		}
		if got := w.waits - before; got != want {
			t.Errorf("Compact(physical %v) waited for the local deletions %d times, want %d", physical, got, want)
		}
	}
}
