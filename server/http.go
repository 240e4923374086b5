package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

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
		mux.Handle(gatewayPrefix, s.metrics.http("v3_gateway", http.MaxBytesHandler(gateway, limit)))
	}
	v2 := s.metrics.http("v2", http.HandlerFunc(s.v2Keys))
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

// health answers as etcd's /health: 200 {"health":"true","reason":""}
// when the member has a leader and can serve a linearizable read, else
// 503 with the reason.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	type body struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	ok, reason := true, ""
	st := s.node.Status()
	if st.Leader == 0 {
		ok, reason = false, "RAFT NO LEADER"
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if err := s.node.ReadBarrier(ctx); err != nil {
			ok, reason = false, "QGET ERROR: "+err.Error()
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	b := body{Health: "true", Reason: reason}
	if !ok {
		b.Health = "false"
	}
	_ = json.NewEncoder(w).Encode(b)
}

// version answers as etcd's /version: the etcd API version Strata speaks
// (that of the etcd API module it is built with) and the cluster version.
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"etcdserver":  version.Version,
		"etcdcluster": version.Cluster(version.Version),
		"storage":     version.Cluster(version.Version),
		"server":      "strata",
	})
}
