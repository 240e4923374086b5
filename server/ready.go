package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// catchUp holds client requests back until the member has applied every
// write committed before it started, as etcd does: an etcd member serves
// clients only once it has published its attributes through raft (embed's
// serve waits on ReadyNotify), that is once it has applied the log up to
// that entry. A member restarted after a crash would otherwise answer from
// the state it had when it died: header revisions going back, serializable
// reads older than what other members acknowledged before it returned.
// A single member (cluster.Local) is caught up at once.
type catchUp struct {
	done chan struct{}
	// ok is done, read without a channel operation on every request.
	ok atomic.Bool
}

// awaitCaughtUp runs until the node passes a read barrier (the leader's
// commit index, applied here), then lets requests through; it gives up
// when the server shuts down (s.streams ends).
func (s *Server) awaitCaughtUp() {
	for {
		if err := awaitReadable(s.streams, s.node); err == nil {
			s.caughtUp.ok.Store(true)
			close(s.caughtUp.done)
			return
		}
		select {
		case <-s.streams.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitCaughtUp returns nil once the member caught up, or ctx's error (as a
// gRPC status) if ctx ends first.
func (s *Server) waitCaughtUp(ctx context.Context) error {
	if s.caughtUp.ok.Load() {
		return nil
	}
	select {
	case <-s.caughtUp.done:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

func (s *Server) caughtUpUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.waitCaughtUp(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) caughtUpStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.waitCaughtUp(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}

// caughtUpHTTP is the same gate for the v2 keys API.
func (s *Server) caughtUpHTTP(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.waitCaughtUp(r.Context()); err != nil {
			http.Error(w, "member has not caught up with the cluster yet", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}
