package server

import (
	"encoding/json"
	"net/http"

	"go.etcd.io/etcd/api/v3/version"
)

// httpHandler routes the HTTP/1.1 side: the v2 keys API, /v2/members,
// /health, /livez and /readyz (probes.go), /version, /metrics and, if given, etcd's gRPC gateway under
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
	mux.Handle("/version", s.metrics.http("version", http.HandlerFunc(s.version)))
	// Every gRPC method's series exist from the start, at zero, as etcd's
	// do (grpc_prometheus.Register): the services are registered by now.
	s.metrics.grpc.InitializeMetrics(s.grpc)
	// /health, /livez, /readyz and /metrics (metricslisten.go).
	s.probeHandlers(mux)
	return mux
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
