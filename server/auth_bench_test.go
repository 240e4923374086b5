package server

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkAuthRange is one client's Range with auth off and on (a user
// with a read permission on a prefix, not root, so the permission check
// runs in full): what the per-request check costs, bcrypt excluded (paid
// once, at Authenticate). go test ./server -run '^$' -bench AuthRange
// -benchtime 3000x
func BenchmarkAuthRange(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "auth=off"
		if on {
			name = "auth=on"
		}
		b.Run(name, func(b *testing.B) {
			cfg := testConfig(b)
			cfg.Server.BcryptCost = 4
			s := startServer(b, cfg)
			c := newClient(b, s, nil)
			if on {
				setupAuth(b, c, "alice")
				var err error
				if c, err = authClient(b, s, "alice", "alicepw"); err != nil {
					b.Fatal(err)
				}
			} else if _, err := c.Put(context.Background(), "/pub/a", "1"); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Get(ctx, "/pub/a", clientv3.WithSerializable()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
