package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzHTTP drives the HTTP handlers (v2 keys, members, health, version)
// with arbitrary requests. No request may panic or answer outside 1xx-5xx;
// a v2 error is etcd's JSON with an error code; and nothing is
// half-written: the store revision moves only when a write answers 2xx,
// by exactly one. CI runs the seed corpus.
func FuzzHTTP(f *testing.F) {
	for _, seed := range []struct{ method, target, ctype, body string }{
		{"GET", "/v2/keys/foo", "", ""},
		{"PUT", "/v2/keys/foo", "application/x-www-form-urlencoded", "value=bar"},
		{"PUT", "/v2/keys/foo?prevExist=false", "application/x-www-form-urlencoded", "value=x"},
		{"PUT", "/v2/keys/foo?prevValue=bar&prevIndex=2", "application/x-www-form-urlencoded", "value=y"},
		{"DELETE", "/v2/keys/foo?prevIndex=abc", "", ""},
		{"POST", "/v2/keys/q", "multipart/form-data; boundary=x", "--x\r\n"},
		{"PUT", "/v2/keys/%zz", "application/x-www-form-urlencoded", "value=%zz"},
		{"PUT", "/v2/keys/a?ttl=1&dir=true", "", ""},
		{"GET", "/v2/keys/", "", ""},
		{"GET", "/v2/members", "", ""},
		{"GET", "/health", "", ""},
		{"BREW", "/version", "", ""},
		{"PUT", "/v2/keys/" + strings.Repeat("k", 40000), "application/x-www-form-urlencoded", "value=1"},
	} {
		f.Add(seed.method, seed.target, seed.ctype, []byte(seed.body))
	}
	cfg := testConfig(f)
	cfg.Server.MaxRequestBytes = 4096
	s := startServer(f, cfg)
	h := s.httpHandler(nil) // the v2 API and the plain endpoints; the gateway is grpc-gateway's
	f.Fuzz(func(t *testing.T, method, target, ctype string, body []byte) {
		u, err := url.ParseRequestURI(target)
		if err != nil || method == "" || strings.ContainsAny(method, " \t\r\n") || u.Path == "/metrics" {
			return
		}
		r := &http.Request{Method: method, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Host: "fuzz"}
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		r = r.WithContext(t.Context())
		before := s.store.Rev()
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, r)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %q (content type %q, body %q): no answer in 10 s", method, target, ctype, body)
		}
		after := s.store.Rev()
		if w.Code < 100 || w.Code > 599 {
			t.Fatalf("%s %s: status %d", method, target, w.Code)
		}
		// The keys API's routes, as etcd's mux has them (/v2/keys0 is
		// another path: a plain 404, in etcd too).
		keysPath := u.Path == v2KeysPrefix || strings.HasPrefix(u.Path, v2KeysPrefix+"/")
		if keysPath && w.Code >= 400 && w.Code != http.StatusMethodNotAllowed {
			var e v2Error
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.ErrorCode == 0 || e.Message == "" {
				t.Fatalf("%s %s: %d with body %q: not a v2 error", method, target, w.Code, w.Body.Bytes())
			}
		}
		write := w.Code >= 200 && w.Code < 300 && (method == http.MethodPut || method == http.MethodDelete)
		switch {
		case write && after != before+1:
			t.Fatalf("%s %s: %d, but the revision went from %d to %d", method, target, w.Code, before, after)
		case !write && after != before:
			t.Fatalf("%s %s: %d, yet the revision went from %d to %d", method, target, w.Code, before, after)
		}
	})
}
