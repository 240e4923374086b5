package floorserver

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os/signal"
	"syscall"

	"github.com/stratadb/strata/internal/bench/cpuprofile"
)

// Main runs the floor program: it listens on --listen-client (a loopback
// HOST:PORT), logs one line to stderr when it serves, and serves until
// SIGTERM or SIGINT.
func Main(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("listen-client", "127.0.0.1:2379", "loopback `HOST:PORT` for gRPC and HTTP")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: floor takes flags only", fs.Arg(0))
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("--listen-client %q: must be a loopback HOST:PORT such as 127.0.0.1:2379", *addr)
	}
	stopProfile, err := cpuprofile.Start()
	if err != nil {
		return err
	}
	defer stopProfile()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("--listen-client %q: %w", *addr, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := New()
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(l) }()
	fmt.Fprintf(stderr, "floor: %s serving http://%s (a measurement baseline, not a server)\n", Name, *addr)
	select {
	case <-ctx.Done():
		s.Stop()
		return nil
	case err := <-errc:
		s.Stop()
		return err
	}
}
