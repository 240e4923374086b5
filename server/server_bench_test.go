package server

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The server's request paths over loopback with real clients, 64 at a
// time (the middle row of etcd v2.1's QPS benchmark): go test ./server -run ^$
// -bench . -benchtime 5000x. Writes are fsynced (sync = true).

func benchServer(b *testing.B) *Server {
	cfg := testConfig(b)
	return startServer(b, cfg)
}

func BenchmarkV2(b *testing.B) {
	value := strings.Repeat("v", 64)
	for _, op := range []string{"get", "put"} {
		b.Run("op="+op, func(b *testing.B) {
			s := benchServer(b)
			u := "http://" + s.Addr().String() + "/v2/keys/bench"
			tr := &http.Transport{MaxIdleConnsPerHost: 64}
			hc := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			do := func(method string) {
				var body io.Reader
				if method == http.MethodPut {
					body = strings.NewReader(url.Values{"value": {value}}.Encode())
				}
				req, _ := http.NewRequest(method, u, body)
				if body != nil {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
				resp, err := hc.Do(req)
				if err != nil {
					b.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					b.Errorf("%s: %d", method, resp.StatusCode)
				}
			}
			do(http.MethodPut)
			method := http.MethodGet
			if op == "put" {
				method = http.MethodPut
			}
			b.SetParallelism(32) // 64 clients on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					do(method)
				}
			})
		})
	}
}

func BenchmarkV3(b *testing.B) {
	value := strings.Repeat("v", 64)
	for _, op := range []string{"range", "put"} {
		b.Run("op="+op, func(b *testing.B) {
			s := benchServer(b)
			c := newClient(b, s, nil)
			ctx := context.Background()
			if _, err := c.Put(ctx, "bench", value); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(32)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if op == "put" {
						_, err = c.Put(ctx, "bench", value)
					} else {
						_, err = c.Get(ctx, "bench", clientv3.WithSerializable())
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
