package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/soheilhy/cmux"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// grpcOverheadBytes is what gRPC gets above max_request_bytes for framing,
// as in etcd.
const grpcOverheadBytes = 512 * 1024

// streamWorkers is the number of goroutines that serve gRPC requests
// (see serve): as many as the clients of the largest row of etcd's QPS
// benchmark; requests beyond them in flight get goroutines of their own
// as before, and an idle worker costs a few KiB of stack. 64 were too
// few on a cluster: a linearizable read holds its worker through the
// ReadIndex round, so at 256 clients most requests grew a new stack
// (copystack was 16% of three members' CPU); at 256 the 256-client rows
// took 0.80-0.93x the CPU per request (docs/benchmarks-server.md).
const streamWorkers = 256

// serve builds the gRPC and HTTP servers and starts serving both on the
// one listener, as etcd does: without TLS, cmux sends HTTP/2 connections
// (gRPC) to the gRPC server and the rest to net/http; with TLS, net/http
// serves both (ALPN picks HTTP/2 or HTTP/1.1) and hands requests of
// content-type application/grpc to the gRPC server.
func (s *Server) serve() error {
	sc := s.cfg.Server
	s.ranges = newRangeGate()
	gopts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(newRangeCodec(s.ranges)),
		grpc.MaxRecvMsgSize(int(sc.MaxRequestBytes) + grpcOverheadBytes),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(uint32(sc.MaxConcurrentStreams)),
		grpc.ChainUnaryInterceptor(s.metrics.unary, s.caughtUpUnary),
		grpc.ChainStreamInterceptor(s.metrics.stream, s.caughtUpStream),
		// Serve requests on a pool of goroutines whose stacks have already
		// grown to what a request needs, instead of a new goroutine per
		// stream that grows its stack (copying it) on every request: the
		// copies were a fifth of the CPU of a v3 read. Past the pool, gRPC
		// starts goroutines as before.
		grpc.NumStreamWorkers(streamWorkers),
		// etcd's: clients may ping every 5 s, also without streams.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	}
	var tlsCfg *tls.Config
	var err error
	if sc.CertFile != "" {
		if tlsCfg, err = serverTLS(sc.CertFile, sc.KeyFile, sc.ClientCAFile); err != nil {
			return err
		}
	} else {
		gopts = append(gopts, grpc.Creds(insecure.NewCredentials()))
	}
	s.grpc = grpc.NewServer(gopts...)
	pb.RegisterKVServer(s.grpc, &kvServer{kv: s, auth: s.auth, hdr: s.header(), maxTxnOps: int(s.cfg.Server.MaxTxnOps)})
	pb.RegisterWatchServer(s.grpc, &watchServer{store: s.store, auth: s.auth, hdr: s.header(), node: s.node, streams: s.streams,
		progressEvery:   time.Duration(s.cfg.Server.WatchProgressNotifyIntervalMS) * time.Millisecond,
		maxRequestBytes: int(s.cfg.Server.MaxRequestBytes)})
	pb.RegisterLeaseServer(s.grpc, &leaseServer{raft: s, auth: s.auth, hdr: s.header(), lessor: s.lease, store: s.store, ids: &s.leaseIDs, streams: s.streams})
	pb.RegisterMaintenanceServer(s.grpc, &maintenanceServer{node: s.node, db: s.db, store: s.store, auth: s.auth, hdr: s.header(),
		raft: s, alarms: s.apply.alarms, quota: quotaGauge(s.cfg), spaceChanged: func() { s.space.sample() }})
	pb.RegisterClusterServer(s.grpc, &clusterServer{node: s.node, hdr: s.header()})
	pb.RegisterAuthServer(s.grpc, &authServer{raft: s, auth: s.auth, hdr: s.header()})
	// gRPC's standard health service, as etcd registers it (v3rpc's
	// grpc.go): SERVING for every service once the server accepts
	// requests. Clients and etcd's robustness tests check a member with it.
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s.grpc, hs)

	gateway, closeGateway, err := s.gateway()
	if err != nil {
		return err
	}
	s.closeGateway = closeGateway
	mux := s.httpHandler(gateway)
	httpSrv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          nil,
	}
	s.http = httpSrv
	if tlsCfg != nil {
		// net/http writes its HTTP/2 defaults into a server's TLSConfig
		// as it starts: the other listeners take a copy made before.
		clientsTLS := tlsCfg.Clone()
		httpSrv.Handler = grpcOrHTTP(s.grpc, mux)
		httpSrv.TLSConfig = tlsCfg
		s.goServe(func() error { return httpSrv.ServeTLS(s.ln, "", "") })
		s.serveClients(mux, clientsTLS)
		return s.serveMetrics()
	}
	m := cmux.New(s.ln)
	grpcL := m.Match(cmux.HTTP2())
	httpL := m.Match(cmux.Any())
	s.goServe(func() error { return s.grpc.Serve(grpcL) })
	s.goServe(func() error { return httpSrv.Serve(httpL) })
	s.goServe(m.Serve)
	s.serveClients(mux, nil)
	return s.serveMetrics()
}

// goServe runs a serve loop, recording an error other than the one a
// shutdown causes.
func (s *Server) goServe(fn func() error) {
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		err := fn()
		if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) ||
			errors.Is(err, net.ErrClosed) || errors.Is(err, cmux.ErrListenerClosed) || errors.Is(err, cmux.ErrServerClosed) ||
			s.streams.Err() != nil {
			return
		}
		s.setServeErr(err)
	}()
}

// shutdownListeners stops accepting, ends the long-lived streams and
// waits (up to ShutdownTimeout) for the requests in flight.
func (s *Server) shutdownListeners() {
	s.cancelStreams()
	_ = s.ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	done := make(chan struct{})
	go func() {
		closeListeners(ctx, s.metricsLns)
		closeListeners(ctx, s.clientLns)
		_ = s.http.Shutdown(ctx)
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		_ = s.http.Close()
		<-done
	}
	s.closeGateway()
	s.serving.Wait()
}

// grpcOrHTTP routes gRPC requests (HTTP/2, content-type application/grpc)
// to the gRPC server and the rest to the HTTP handler: etcd's
// grpcHandlerFunc, for TLS, where one net/http server serves both.
func grpcOrHTTP(g *grpc.Server, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc") {
			g.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// serverTLS loads the server's certificate and, for mutual TLS, the CAs
// client certificates must chain to.
func serverTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: cert_file = %q, key_file = %q: %w", certFile, keyFile, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("server: client_ca_file = %q: %w", caFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("server: client_ca_file = %q: no PEM certificate in the file", caFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
