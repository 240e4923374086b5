package server

import (
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkList lists 20,000 keys of 256-byte values over loopback, as
// Kubernetes' apiserver lists a resource: with RangeStream (etcd 3.7)
// and with the pages of 500 keys it falls back to without it. Run:
// go test ./server -run ^$ -bench BenchmarkList -benchtime 20x
func BenchmarkList(b *testing.B) {
	const keys = 20000
	s := benchServer(b)
	c := newClient(b, s, nil)
	ctx := testCtx(b)
	value := strings.Repeat("v", 256)
	for first := 0; first < keys; first += 100 {
		var ops []clientv3.Op
		for i := first; i < first+100; i++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("/registry/pods/ns/pod-%06d", i), value))
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("via=stream", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(keys * 256)
		for b.Loop() {
			ch, err := c.GetStream(ctx, "/registry/pods/", clientv3.WithPrefix())
			if err != nil {
				b.Fatal(err)
			}
			resp, err := clientv3.GetStreamToGetResponse(ch)
			if err != nil || len(resp.Kvs) != keys {
				b.Fatalf("stream: %v, %v", len(resp.Kvs), err)
			}
		}
	})
	b.Run("via=pages", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(keys * 256)
		for b.Loop() {
			n, key, rev := 0, "/registry/pods/", int64(0)
			end := clientv3.GetPrefixRangeEnd(key)
			for {
				resp, err := c.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(500), clientv3.WithRev(rev))
				if err != nil {
					b.Fatal(err)
				}
				n += len(resp.Kvs)
				rev = resp.Header.Revision
				if !resp.More {
					break
				}
				key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
			if n != keys {
				b.Fatalf("pages: %d keys", n)
			}
		}
	})
}
