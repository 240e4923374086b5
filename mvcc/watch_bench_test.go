package mvcc

import (
	"fmt"
	"testing"
)

// BenchmarkPutWithWatchers puts to watched keys of an in-memory store
// with no watcher, and with watchers set up as etcd's `benchmark watch`:
// one per key on 10,000 keys plus 100 on the prefix of the first 100
// keys, spread over 10 WatchStreams, each drained by one consumer as the
// server's gRPC streams are. It measures what publishing a revision costs
// as watchers grow: finding the watchers of its keys and handing over
// their events.
func BenchmarkPutWithWatchers(b *testing.B) {
	const keys, streams = 10000, 10
	key := func(i int) []byte { return fmt.Appendf(nil, "/w/%05d", i%keys) }
	value := make([]byte, 256)
	for _, watchers := range []int{0, keys} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			s, _ := newMemStore(b, Options{})
			wss := make([]*WatchStream, streams)
			for i := range wss {
				wss[i] = s.NewWatchStream()
				defer wss[i].Close()
			}
			for i := range watchers {
				if _, err := wss[i%streams].Watch(key(i), nil, 0); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 100 * min(watchers, 1) {
				if _, err := wss[i%streams].Watch([]byte("/w/000"), []byte("/w/001"), 0); err != nil {
					b.Fatal(err)
				}
			}
			done := make(chan struct{})
			defer close(done)
			for _, ws := range wss {
				go func() {
					for {
						if _, ok := ws.Next(); ok {
							continue
						}
						select {
						case <-ws.Ready():
						case <-done:
							return
						}
					}
				}()
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(value)))
			i := 0
			for b.Loop() {
				if _, err := s.Put(key(i), value); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
