package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	gw "go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
)

// gatewayPrefix is where etcd serves its gRPC gateway: the v3 API as JSON
// over HTTP/1.1 (POST /v3/kv/put, /v3/kv/range, /v3/watch, ...), with
// bytes fields in base64, for clients without gRPC (curl, browsers).
const gatewayPrefix = "/v3/"

// gatewayBetaPrefix is where etcd 3.4 also serves the gateway (its
// earlier path, dropped in etcd 3.5); tools written for 3.4 still call it.
const gatewayBetaPrefix = "/v3beta/"

// betaToV3 serves /v3beta/... as /v3/..., as etcd 3.4 does.
func betaToV3(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r2 := r.Clone(r.Context())
		r2.URL.Path = gatewayPrefix + strings.TrimPrefix(r.URL.Path, gatewayBetaPrefix)
		if r.URL.RawPath != "" {
			r2.URL.RawPath = gatewayPrefix + strings.TrimPrefix(r.URL.RawPath, gatewayBetaPrefix)
		}
		h.ServeHTTP(w, r2)
	})
}

// gatewayBufferBytes is the in-memory pipe between the gateway and the
// gRPC server, per direction.
const gatewayBufferBytes = 1 << 20

// gateway returns etcd's gRPC gateway for the server's own gRPC services,
// with etcd's JSON (proto field names, unset fields left out, unknown
// fields ignored). As etcd's, it is a gRPC client of the server; here it
// reaches it through an in-memory connection instead of the network, so
// it needs no address, credentials or client certificate of its own,
// while a caller reaches the gateway only through the client port (and
// its TLS). Streams (Watch, LeaseKeepAlive) answer as newline-separated
// JSON objects for as long as the request lasts. close ends the
// connection.
func (s *Server) gateway() (h http.Handler, close func(), err error) {
	pipe := bufconn.Listen(gatewayBufferBytes)
	conn, err := grpc.NewClient("passthrough:///strata-gateway",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return pipe.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)))
	if err != nil {
		return nil, nil, fmt.Errorf("server: gRPC gateway: %w", err)
	}
	mux := runtime.NewServeMux(runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.HTTPBodyMarshaler{
		Marshaler: &runtime.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		},
	}))
	for _, register := range []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		gw.RegisterKVHandler, gw.RegisterWatchHandler, gw.RegisterLeaseHandler,
		gw.RegisterClusterHandler, gw.RegisterMaintenanceHandler, gw.RegisterAuthHandler,
	} {
		if err := register(s.streams, mux, conn); err != nil {
			_ = conn.Close()
			return nil, nil, fmt.Errorf("server: gRPC gateway: %w", err)
		}
	}
	s.goServe(func() error { return s.grpc.Serve(pipe) })
	return mux, func() { _ = conn.Close() }, nil
}
