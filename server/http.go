package server

import (
	"encoding/json"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.etcd.io/etcd/api/v3/version"
)

// httpHandler routes the HTTP/1.1 side: the v2 keys API, /v2/members,
// /health, /version, /metrics and, if given, etcd's gRPC gateway under
// /v3/; any other path is 404.
func (s *Server) httpHandler(gateway http.Handler) http.Handler {
	mux := http.NewServeMux()
	if gateway != nil {
		// A body is read whole before it becomes a gRPC message: bound it
		// as gRPC bounds a message.
		limit := s.cfg.Server.MaxRequestBytes + grpcOverheadBytes
		gw := s.metrics.http("v3_gateway", http.MaxBytesHandler(gateway, limit))
		mux.Handle(gatewayPrefix, gw)
		mux.Handle(gatewayBetaPrefix, betaToV3(gw))
	}
	v2 := s.metrics.http("v2", s.caughtUpHTTP(http.HandlerFunc(s.v2Keys)))
	mux.Handle(v2KeysPrefix, v2)
	mux.Handle(v2KeysPrefix+"/", v2)
	members := s.metrics.http("v2_members", http.HandlerFunc(s.v2Members))
	mux.Handle("/v2/members", members)
	mux.Handle("/v2/members/", members)
	mux.Handle("/health", s.metrics.http("health", http.HandlerFunc(s.health)))
	mux.Handle("/version", s.metrics.http("version", http.HandlerFunc(s.version)))
	// Every gRPC method's series exist from the start, at zero, as etcd's
	// do (grpc_prometheus.Register): the services are registered by now.
	s.metrics.grpc.InitializeMetrics(s.grpc)
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
	return mux
}

// health answers as etcd 3.7's /health: 200 {"health":"true","reason":""}
// when the member has a leader and can serve a linearizable read, else
// 503 with the reason (etcd's "RAFT NO LEADER", "RANGE ERROR:..."); with
// ?serializable=true, as etcd, it checks neither the leader nor a
// linearizable read, only that the member serves (a liveness probe).
// Like etcd's, the answer is sent as text/plain (etcd writes the JSON
// without setting a type) with no newline after it; GET only. etcd 3.4
// answered {"health":"true"}, without the reason: see docs/server.md.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !allowGET(w, r) {
		return
	}
	type body struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	b := body{Health: "true"}
	if r.URL.Query().Get("serializable") != "true" {
		if s.node.Status().Leader == 0 {
			b = body{Health: "false", Reason: "RAFT NO LEADER"}
		} else if err := s.readBarrier(r.Context()); err != nil {
			b = body{Health: "false", Reason: "RANGE ERROR:" + toGRPC(err).Error()}
		}
	}
	d, _ := json.Marshal(b)
	if b.Health != "true" {
		http.Error(w, string(d), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(d)
}

// versions is etcd's /version body (etcd's version.Versions, in its
// field order), with the server's name after etcd's fields.
type versions struct {
	Server  string `json:"etcdserver"`
	Cluster string `json:"etcdcluster"`
	Storage string `json:"storage"`
	Name    string `json:"server"`
}

// version answers as etcd 3.7's /version: the etcd API version Strata
// speaks (that of the etcd API module it is built with), and the cluster
// and storage versions in etcd's X.Y.0 form.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	if !allowGET(w, r) {
		return
	}
	cv := version.Cluster(version.Version) + ".0"
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(versions{Server: version.Version, Cluster: cv, Storage: cv, Name: "strata"})
	_, _ = w.Write(b)
}

// allowGET answers 405 to a method other than GET, as etcd's allowMethod.
func allowGET(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet {
		return true
	}
	w.Header().Set("Allow", http.MethodGet)
	http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	return false
}
