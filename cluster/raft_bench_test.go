package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkRaftProposeKubeSized measures the raft layer's cost of
// Kubernetes-sized writes: 14 KB values (a pod's size), 32 proposers
// spread over the three members of an in-process cluster, with etcd's
// snapshot defaults (10,000 entries, 5,000 kept behind). Besides the
// rate it reports the process's CPU per proposal (all three members),
// the Go heap in use after the run (what the members hold: the raft logs'
// memory, not the toy state machine's, which keeps 500 keys), and the
// raft directories' size on disk.
//
//	go test ./cluster -run '^$' -bench RaftProposeKubeSized -benchtime 20000x
func BenchmarkRaftProposeKubeSized(b *testing.B) {
	value := strings.Repeat("p", 14<<10)
	c := newBenchCluster(b)
	c.leader()
	var n atomic.Int64
	cpu0 := processCPU()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := n.Add(1); i <= int64(b.N); i = n.Add(1) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := c.nodes[g%3].Propose(ctx, []byte(fmt.Sprintf("put k%d %s", i%500, value)))
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "proposals/s")
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N)*1000, "cpu-ms/1000")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MB")
	var disk int64
	_ = filepath.Walk(c.dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			disk += info.Size()
		}
		return nil
	})
	b.ReportMetric(float64(disk)/(1<<20), "disk-MB")
}

// processCPU returns the user and system CPU time of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
