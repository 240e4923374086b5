package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/soheilhy/cmux"

	"github.com/stratadb/strata/config"
)

// The client listeners beside server.listen (server.listen_client_urls,
// etcd's --listen-client-urls past the first port and scheme): each
// serves everything listen does (the v3 API, v2, the gateway, /metrics
// and the probes), an http URL without TLS and an https URL with the
// client TLS, so that etcd's "https://IP:2379,http://127.0.0.1:4001"
// works as in etcd.

// clientListener is one of server.listen_client_urls.
type clientListener struct {
	ln  net.Listener
	srv *http.Server
	tls bool
}

// listenClients opens every extra client URL, so that an address in use
// fails Start before anything is served.
func (s *Server) listenClients() error {
	for _, raw := range s.cfg.Server.ListenClientURLs {
		lu, err := config.ParseListenURL(raw)
		if err != nil { // Validate checked it
			return fmt.Errorf("server: listen_client_urls = %q: %w", raw, err)
		}
		ln, err := net.Listen("tcp", lu.Addr)
		if err != nil {
			return fmt.Errorf("server: listen_client_urls = %q: %w", raw, err)
		}
		s.clientLns = append(s.clientLns, &clientListener{ln: ln, tls: lu.TLS})
	}
	return nil
}

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
func (s *Server) ClientURLs() []string {
	urls := make([]string, len(s.clientLns))
	for i, cl := range s.clientLns {
		scheme := "http"
		if cl.tls {
			scheme = "https"
		}
		urls[i] = scheme + "://" + cl.ln.Addr().String()
	}
	return urls
}

// closeClients stops the extra client listeners: no new connections,
// the requests in flight given until ctx ends.
func (s *Server) closeClients(ctx context.Context) {
	for _, cl := range s.clientLns {
		if cl.srv == nil {
			_ = cl.ln.Close()
			continue
		}
		if err := cl.srv.Shutdown(ctx); err != nil {
			_ = cl.srv.Close()
		}
	}
}
