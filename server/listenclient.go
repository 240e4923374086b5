package server

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/soheilhy/cmux"
)

// The client listeners beside server.listen (server.listen_client_urls,
// etcd's --listen-client-urls past the first port and scheme): each
// serves everything listen does (the v3 API, v2, the gateway, /metrics
// and the probes), an http URL without TLS and an https URL with the
// client TLS, so that etcd's "https://IP:2379,http://127.0.0.1:4001"
// works as in etcd. Start opens them (openListeners).

// serveClients serves the extra client listeners as serve serves listen:
// with TLS, one net/http server handing gRPC requests to s.grpc; without,
// cmux splitting HTTP/2 (gRPC) from the rest. handler is listen's HTTP
// handler; tlsCfg its TLS (nil without cert_file: then every extra URL
// is http, as Validate requires).
func (s *Server) serveClients(handler http.Handler, tlsCfg *tls.Config) {
	for _, cl := range s.clientLns {
		cl.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 1 << 20}
		if cl.tls {
			cl.srv.Handler = grpcOrHTTP(s.grpc, handler)
			cl.srv.TLSConfig = tlsCfg.Clone()
			s.goServe(func() error { return cl.srv.ServeTLS(cl.ln, "", "") })
			continue
		}
		m := cmux.New(cl.ln)
		grpcL := m.Match(cmux.HTTP2())
		httpL := m.Match(cmux.Any())
		s.goServe(func() error { return s.grpc.Serve(grpcL) })
		s.goServe(func() error { return cl.srv.Serve(httpL) })
		s.goServe(m.Serve)
	}
}

// ClientURLs returns the extra client URLs as they listen (a port 0 given
// resolved).
func (s *Server) ClientURLs() []string { return listenerURLs(s.clientLns) }
