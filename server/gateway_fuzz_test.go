package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// gatewayFuzzPaths are the gateway's unary calls the fuzzer may aim at
// (its streams, watch and lease keep-alive, last as long as the request).
var gatewayFuzzPaths = []string{
	"/v3/kv/range", "/v3/kv/put", "/v3/kv/deleterange", "/v3/kv/txn", "/v3/kv/compaction",
	"/v3/lease/grant", "/v3/lease/revoke", "/v3/lease/timetolive", "/v3/lease/leases",
	"/v3/maintenance/status", "/v3/maintenance/hash", "/v3/maintenance/hashkv", "/v3/maintenance/alarm",
	"/v3/cluster/member/list", "/v3/cluster/member/add", "/v3/auth/status", "/v3/nope",
}

// FuzzGateway sends arbitrary JSON bodies to the gateway's calls, which
// reach the v3 handlers as arbitrary protobuf requests: no request may
// panic, hang or answer outside 1xx-5xx, and an error is the gateway's
// JSON with a gRPC code and a message. CI runs the seed corpus.
func FuzzGateway(f *testing.F) {
	for _, seed := range []struct {
		path uint8
		body string
	}{
		{0, `{"key":"Zm9v"}`},
		{0, `{"key":"AA==","range_end":"AA==","revision":"-5","sort_order":"DESCEND","sort_target":"VALUE","limit":"3"}`},
		{1, `{"key":"Zm9v","value":"YmFy","lease":"123"}`},
		{1, `{"key":"","value":"YmFy","ignore_value":true}`},
		{2, `{"key":"AA==","range_end":"AA==","prev_kv":true}`},
		{3, `{"compare":[{"key":"Zm9v","target":"MOD","result":"GREATER","mod_revision":"99"}],"success":[{"request_put":{"key":"Zm9v","value":"eA=="}}],"failure":[{"request_txn":{}}]}`},
		{4, `{"revision":"1000","physical":true}`},
		{5, `{"TTL":"-1","ID":"7"}`},
		{6, `{"ID":"0"}`},
		{7, `{"ID":"42","keys":true}`},
		{12, `{"action":"ACTIVATE","alarm":"NOSPACE"}`},
		{14, `{"peerURLs":["not a url"]}`},
		{16, `{}`},
		{1, `{"key": 5`},
		{0, "\x00\xff"},
	} {
		f.Add(seed.path, []byte(seed.body))
	}
	cfg := testConfig(f)
	cfg.Server.MaxRequestBytes = 4096
	s := startServer(f, cfg)
	base := "http://" + s.Addr().String()
	client := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		p := gatewayFuzzPaths[int(path)%len(gatewayFuzzPaths)]
		resp, err := client.Post(base+p, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s %q: %v", p, body, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode < 100 || resp.StatusCode > 599 {
			t.Fatalf("POST %s %q: status %d", p, body, resp.StatusCode)
		}
		if resp.StatusCode >= 400 && resp.StatusCode != http.StatusNotFound {
			var e struct {
				Code    *int   `json:"code"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal(out, &e); err != nil || e.Code == nil || e.Message == "" {
				t.Fatalf("POST %s %q: %d with body %q: not a gateway error", p, body, resp.StatusCode, out)
			}
		}
	})
}
