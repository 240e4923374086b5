// Command profserve is the strata command with Go's profiler switched on,
// for finding where `strata serve` spends its time and memory under
// `strata bench`:
//
//	go build -o /tmp/strata-prof ./internal/bench/profserve
//	STRATA_PPROF_ADDR=127.0.0.1:6060 strata bench qps --strata /tmp/strata-prof ...
//	go tool pprof -top http://127.0.0.1:6060/debug/pprof/profile?seconds=20
//
// With STRATA_PPROF_ADDR (a loopback HOST:PORT) it serves net/http/pprof
// there; with STRATA_CPUPROFILE=FILE it writes a CPU profile of the whole
// run to FILE when the command returns (serve returns after SIGTERM; see
// package cpuprofile). The release binary, cmd/strata, has neither.
package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the /debug/pprof handlers on http.DefaultServeMux
	"os"

	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/bench/cpuprofile"
	"github.com/stratadb/strata/internal/cmalloc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}

func run() error {
	// As cmd/strata does, so that profiles show the release binary's costs.
	if _, err := cmalloc.ExecWithHugePages(); err != nil {
		fmt.Fprintln(os.Stderr, "strata: starting with huge pages for C blocks:", err)
	}
	if addr := os.Getenv("STRATA_PPROF_ADDR"); addr != "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("STRATA_PPROF_ADDR=%q: must be a loopback HOST:PORT such as 127.0.0.1:6060", addr)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("STRATA_PPROF_ADDR=%q: %w", addr, err)
		}
		go http.Serve(l, nil)
	}
	stop, err := cpuprofile.Start()
	if err != nil {
		return err
	}
	defer stop()
	return admin.NewRootCommand().Execute()
}
