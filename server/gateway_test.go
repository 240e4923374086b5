package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// gatewayPost posts a JSON body to the gateway and decodes the answer.
func gatewayPost(t *testing.T, s *Server, path, body string, out any) int {
	t.Helper()
	resp, err := http.Post("http://"+s.Addr().String()+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %d %q: %v", path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestGateway drives etcd's gRPC gateway as curl users of etcd do: JSON
// over HTTP/1.1 on the client port, bytes in base64, etcd's field names;
// put, range, a streamed watch, status, and errors in the gateway's shape.
func TestGateway(t *testing.T) {
	s := startServer(t, testConfig(t))
	var put struct {
		Header struct{ Revision string }
	}
	if code := gatewayPost(t, s, "/v3/kv/put", `{"key":"`+b64("foo")+`","value":"`+b64("bar")+`"}`, &put); code != 200 || put.Header.Revision == "" {
		t.Fatalf("put: %d %+v", code, put)
	}
	var rng struct {
		Kvs []struct {
			Key, Value  string
			ModRevision string `json:"mod_revision"`
		}
		Count string
	}
	if code := gatewayPost(t, s, "/v3/kv/range", `{"key":"`+b64("foo")+`","unknown_field":1}`, &rng); code != 200 ||
		len(rng.Kvs) != 1 || rng.Kvs[0].Value != b64("bar") || rng.Kvs[0].ModRevision != put.Header.Revision || rng.Count != "1" {
		t.Fatalf("range: %d %+v (put at %s)", code, rng, put.Header.Revision)
	}
	var status struct {
		Leader, Version string
	}
	if code := gatewayPost(t, s, "/v3/maintenance/status", `{}`, &status); code != 200 || status.Leader == "" || status.Version == "" {
		t.Fatalf("status: %d %+v", code, status)
	}
	var bad struct {
		Code    int
		Message string
	}
	if code := gatewayPost(t, s, "/v3/kv/put", `{"key": 5`, &bad); code != http.StatusBadRequest || bad.Message == "" {
		t.Errorf("malformed JSON: %d %+v", code, bad)
	}
	huge := `{"key":"` + b64("big") + `","value":"` + strings.Repeat("A", int(s.cfg.Server.MaxRequestBytes+grpcOverheadBytes)) + `"}`
	if code := gatewayPost(t, s, "/v3/kv/put", huge, &bad); code != http.StatusBadRequest {
		t.Errorf("a body over max_request_bytes: %d %+v, want 400", code, bad)
	} else {
		t.Logf("a body over max_request_bytes: %d %+v", code, bad)
	}
	var auth struct {
		Enabled      bool
		AuthRevision string
	}
	if code := gatewayPost(t, s, "/v3/auth/status", `{}`, &auth); code != 200 || auth.Enabled || auth.AuthRevision != "1" {
		t.Errorf("auth status: %d %+v, want 200, disabled, auth revision 1", code, auth)
	}

	// A watch streams one JSON object per response.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.Addr().String()+"/v3/watch",
		strings.NewReader(`{"create_request":{"key":"`+b64("w")+`"}}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func() map[string]any {
		if !lines.Scan() {
			t.Fatalf("watch stream ended: %v", lines.Err())
		}
		var m struct{ Result map[string]any }
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("watch line %q: %v", lines.Bytes(), err)
		}
		return m.Result
	}
	if r := next(); r["created"] != true {
		t.Fatalf("first watch response %v, want created", r)
	}
	gatewayPost(t, s, "/v3/kv/put", `{"key":"`+b64("w")+`","value":"`+b64("1")+`"}`, nil)
	r := next()
	evs, _ := r["events"].([]any)
	if len(evs) != 1 || !strings.Contains(jsonOf(t, evs[0]), b64("1")) {
		t.Fatalf("watch response %v, want the put of w", r)
	}
}
