// Command floor is the transport floor of `strata bench qps`
// (--servers floor): etcd's v3 KV Range and Put on grpc-go and the v2
// keys API's GET and PUT on net/http, answered from a map in memory, so
// that the benchmark shows what the transport alone costs per request
// beside Strata and etcd. It is a measurement baseline, not a server:
// it keeps nothing, serves single keys only and answers Unimplemented to
// the rest of etcd's API. See package floorserver.
//
//	go build -o /tmp/floor ./internal/bench/floor
//	strata bench qps --servers strata,etcd34,etcd37,floor --floor /tmp/floor
//	STRATA_CPUPROFILE=/tmp/floor.prof /tmp/floor --listen-client 127.0.0.1:2379
package main

import (
	"fmt"
	"os"

	"github.com/stratadb/strata/internal/bench/floorserver"
)

func main() {
	if err := floorserver.Main(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}
