package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// v2Do sends a v2 request with a form body and returns status, headers
// and the decoded JSON body.
func v2Do(t *testing.T, method, u string, form url.Values) (int, http.Header, map[string]any) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, u, raw, err)
		}
	}
	return resp.StatusCode, resp.Header, m
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestV2Keys(t *testing.T) {
	s := startServer(t, testConfig(t))
	base := "http://" + s.Addr().String() + "/v2/keys"
	v := func(s string) url.Values { return url.Values{"value": {s}} }

	for _, tt := range []struct {
		method, path string
		form         url.Values
		status       int
		body         string
		index        string
	}{
		{"GET", "/foo", nil, 404, `{"cause":"/foo","errorCode":100,"index":1,"message":"Key not found"}`, "1"},
		{"PUT", "/foo", v("bar"), 201, `{"action":"set","node":{"createdIndex":2,"key":"/foo","modifiedIndex":2,"value":"bar"}}`, "2"},
		{"GET", "/foo", nil, 200, `{"action":"get","node":{"createdIndex":2,"key":"/foo","modifiedIndex":2,"value":"bar"}}`, "2"},
		{"PUT", "/foo", v("baz"), 200, `{"action":"set","node":{"createdIndex":2,"key":"/foo","modifiedIndex":3,"value":"baz"},"prevNode":{"createdIndex":2,"key":"/foo","modifiedIndex":2,"value":"bar"}}`, "3"},
		{"PUT", "/foo?prevExist=false", v("x"), 412, `{"cause":"/foo","errorCode":105,"index":3,"message":"Key already exists"}`, "3"},
		{"PUT", "/new?prevExist=false", v("n"), 201, `{"action":"create","node":{"createdIndex":4,"key":"/new","modifiedIndex":4,"value":"n"}}`, "4"},
		{"PUT", "/none?prevExist=true", v("n"), 404, `{"cause":"/none","errorCode":100,"index":4,"message":"Key not found"}`, "4"},
		{"PUT", "/foo?prevExist=true", v("u"), 200, `{"action":"update","node":{"createdIndex":2,"key":"/foo","modifiedIndex":5,"value":"u"},"prevNode":{"createdIndex":2,"key":"/foo","modifiedIndex":3,"value":"baz"}}`, "5"},
		{"PUT", "/foo?prevValue=nope", v("c"), 412, `{"cause":"[nope != u]","errorCode":101,"index":5,"message":"Compare failed"}`, "5"},
		{"PUT", "/foo?prevIndex=4", v("c"), 412, `{"cause":"[4 != 5]","errorCode":101,"index":5,"message":"Compare failed"}`, "5"},
		{"PUT", "/foo?prevValue=u&prevIndex=5", v("c"), 200, `{"action":"compareAndSwap","node":{"createdIndex":2,"key":"/foo","modifiedIndex":6,"value":"c"},"prevNode":{"createdIndex":2,"key":"/foo","modifiedIndex":5,"value":"u"}}`, "6"},
		{"PUT", "/foo?prevIndex=x", v("c"), 400, `{"cause":"/foo: invalid value for prevIndex: \"x\"","errorCode":203,"index":6,"message":"The given index in POST form is not a number"}`, "6"},
		{"PUT", "/foo?prevExist=maybe", v("c"), 400, `{"cause":"/foo: invalid value for prevExist: \"maybe\"","errorCode":209,"index":6,"message":"Invalid field"}`, "6"},
		{"DELETE", "/foo?prevValue=x", nil, 412, `{"cause":"[x != c]","errorCode":101,"index":6,"message":"Compare failed"}`, "6"},
		{"DELETE", "/foo", nil, 200, `{"action":"delete","node":{"createdIndex":2,"key":"/foo","modifiedIndex":7},"prevNode":{"createdIndex":2,"key":"/foo","modifiedIndex":6,"value":"c"}}`, "7"},
		{"DELETE", "/foo", nil, 404, `{"cause":"/foo","errorCode":100,"index":7,"message":"Key not found"}`, "7"},
		{"PUT", "/d?dir=true", nil, 400, `{"cause":"/d: dir=true: not supported (Strata's v2 API serves single keys without TTLs or watches)","errorCode":209,"index":7,"message":"Invalid field"}`, "7"},
		{"PUT", "/t?ttl=5", v("x"), 400, `{"cause":"/t: ttl=5: not supported (Strata's v2 API serves single keys without TTLs or watches)","errorCode":209,"index":7,"message":"Invalid field"}`, "7"},
		{"GET", "/t?wait=true", nil, 400, `{"cause":"/t: wait=true: not supported (Strata's v2 API serves single keys without TTLs or watches)","errorCode":209,"index":7,"message":"Invalid field"}`, "7"},
		{"GET", "/", nil, 403, `{"cause":"/: the root directory; Strata's v2 API serves single keys","errorCode":102,"index":7,"message":"Not a file"}`, "7"},
		{"GET", "/a/../new?quorum=true", nil, 200, `{"action":"get","node":{"createdIndex":4,"key":"/new","modifiedIndex":4,"value":"n"}}`, "7"},
		{"PATCH", "/new", nil, 405, ``, ""},
	} {
		status, h, body := v2Do(t, tt.method, base+tt.path, tt.form)
		if status != tt.status {
			t.Errorf("%s %s: status %d, want %d (%v)", tt.method, tt.path, status, tt.status, body)
			continue
		}
		if tt.body != "" {
			if got := jsonOf(t, body); got != tt.body {
				t.Errorf("%s %s:\n got %s\nwant %s", tt.method, tt.path, got, tt.body)
			}
			if h.Get("X-Etcd-Index") != tt.index || h.Get("X-Etcd-Cluster-Id") == "" {
				t.Errorf("%s %s: X-Etcd-Index %q (want %s), X-Etcd-Cluster-Id %q", tt.method, tt.path, h.Get("X-Etcd-Index"), tt.index, h.Get("X-Etcd-Cluster-Id"))
			}
			if status < 300 && (h.Get("X-Raft-Index") == "" || h.Get("X-Raft-Term") == "") {
				t.Errorf("%s %s: no X-Raft-Index or X-Raft-Term", tt.method, tt.path)
			}
		}
	}
}

func TestV2Limits(t *testing.T) {
	cfg := testConfig(t)
	cfg.Server.MaxValueBytes = 10
	cfg.Server.MaxRequestBytes = 1024
	s := startServer(t, cfg)
	base := "http://" + s.Addr().String() + "/v2/keys"
	status, _, body := v2Do(t, "PUT", base+"/k", url.Values{"value": {strings.Repeat("v", 11)}})
	if status != 400 || body["errorCode"] != 209.0 || !strings.Contains(body["cause"].(string), "max_value_bytes = 10") {
		t.Errorf("value over the limit: %d %v", status, body)
	}
	status, _, body = v2Do(t, "PUT", base+"/k", url.Values{"value": {strings.Repeat("v", 2000)}})
	if status != 400 || body["errorCode"] != 210.0 || !strings.Contains(body["cause"].(string), "max_request_bytes = 1024") {
		t.Errorf("body over the limit: %d %v", status, body)
	}
	status, _, _ = v2Do(t, "GET", base+"/k", nil)
	if status != 404 {
		t.Errorf("a refused write was stored: GET status %d", status)
	}
}

func TestHealthVersionMetrics(t *testing.T) {
	s := startServer(t, testConfig(t))
	base := "http://" + s.Addr().String()
	if a := httpDo(t, "GET", base+"/health", ""); a.status != 200 || a.body != `{"health":"true","reason":""}` {
		t.Errorf("/health: %+v", a)
	}
	status, _, body := v2Do(t, "GET", base+"/version", nil)
	if status != 200 || body["etcdserver"] == nil || body["etcdcluster"] == nil {
		t.Errorf("/version: %d %v", status, body)
	}
	v2Do(t, "PUT", base+"/v2/keys/m", url.Values{"value": {"1"}})
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`strata_server_requests_total{api="http",code="201",method="v2 PUT"} 1`,
		"strata_server_request_duration_seconds_bucket", "strata_mvcc_revision 2", "strata_block_cache_capacity_bytes", "go_goroutines",
		"etcd_server_has_leader 1", "etcd_server_is_leader 1", "etcd_server_leader_changes_seen_total 1", "etcd_server_proposals_applied_total 1",
		"etcd_server_proposals_pending 0", "etcd_server_proposals_failed_total 0", "etcd_mvcc_db_total_size_in_bytes "} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if resp, err := http.Get(base + "/nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("unknown path: %v %v", resp, err)
	}
}
