package server

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkV2PutHandler is the server's own work per v2 PUT: the HTTP
// handler (routing, metrics, form parsing, the answer's JSON and headers)
// down through the apply path and the store's group commit, without the
// connection's reads and writes or a client in the same process, so its
// allocs/op are the server's alone. 64 writers at a time, as the middle
// row of etcd v2.1's QPS benchmark; the store syncs (sync = true):
//
//	go test ./server -run '^$' -bench V2PutHandler -benchtime 20000x
func BenchmarkV2PutHandler(b *testing.B) {
	s := benchServer(b)
	h := s.httpHandler(nil)
	u, err := url.ParseRequestURI("/v2/keys/bench")
	if err != nil {
		b.Fatal(err)
	}
	form := url.Values{"value": {strings.Repeat("v", 256)}}.Encode()
	b.SetParallelism(32) // 64 writers on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		// One request and one writer per goroutine, reset before each PUT
		// as net/http's connection would build them, so that only the
		// handler's allocations count.
		body := strings.NewReader(form)
		req := &http.Request{Method: http.MethodPut, URL: u, RequestURI: u.Path, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Host: "bench"}
		req = req.WithContext(b.Context())
		w := &discardWriter{header: http.Header{}}
		for pb.Next() {
			body.Reset(form)
			req.Body, req.ContentLength, req.Form, req.PostForm = discardCloser{body}, body.Size(), nil, nil
			clear(w.header)
			w.code = 0
			h.ServeHTTP(w, req)
			if w.code != http.StatusOK && w.code != http.StatusCreated {
				b.Errorf("PUT: status %d", w.code)
				return
			}
		}
	})
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) { w.code = code }

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return len(p), nil
}

// discardCloser is a request body whose Close does nothing.
type discardCloser struct{ *strings.Reader }

func (discardCloser) Close() error { return nil }
