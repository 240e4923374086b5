package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkRaftPropose measures proposals through a 3-member in-process
// cluster (loopback HTTP transport, fsynced raft logs) with the toy state
// machine, from 1 and 64 concurrent proposers on a follower and on the
// leader: the raft layer's share of a write, without mvcc.
func BenchmarkRaftPropose(b *testing.B) {
	for _, clients := range []int{1, 64} {
		for _, on := range []string{"leader", "follower"} {
			b.Run(fmt.Sprintf("clients=%d/on=%s", clients, on), func(b *testing.B) {
				c := newBenchCluster(b)
				lead := c.leader()
				target := lead
				if on == "follower" {
					target = (lead + 1) % 3
				}
				var n atomic.Int64
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				for g := range clients {
					wg.Go(func() {
						for i := 0; n.Add(1) <= int64(b.N); i++ {
							ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
							_, err := c.nodes[target].Propose(ctx, []byte(fmt.Sprintf("put k%d-%d v", g, i)))
							cancel()
							if err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "proposals/s")
			})
		}
	}
}

func newBenchCluster(b *testing.B) *testCluster {
	return newTestCluster(b, 3, func(cfg *RaftConfig) {
		cfg.TickInterval = 100 * time.Millisecond
		cfg.SnapshotEntries = 10000
		cfg.CatchUpEntries = 5000
	})
}
