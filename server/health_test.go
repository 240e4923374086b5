package server

import (
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestGRPCHealthServing checks gRPC's standard health service, which etcd
// registers beside its own (clients and etcd's robustness tests ask it
// whether a member serves), through a real clientv3 connection.
func TestGRPCHealthServing(t *testing.T) {
	s := startServer(t, testConfig(t))
	cli := newClient(t, s, nil)
	resp, err := healthpb.NewHealthClient(cli.ActiveConnection()).Check(testCtx(t), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Health.Check: %v", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Health.Check status = %v, want SERVING", resp.GetStatus())
	}
}
