// Package bench compares `strata serve` with etcd as separate server
// processes on loopback: etcd v2.1's QPS benchmark (reads and writes of one
// key, 64- and 256-byte values, 1, 64 and 256 clients, QPS and p90) and
// etcd's storage memory benchmark (the resident set after loading N keys
// with several versions). It is the work behind `strata bench qps` and
// `strata bench memory`:
//
//	res, err := bench.RunQPS(ctx, bench.QPSOptions{
//		Programs: bench.Programs{Strata: "/usr/local/bin/strata", Etcd: "/usr/bin/etcd", Etcd37: etcd37},
//		Passes:   3,
//		Progress: os.Stderr,
//	})
//	if err == nil {
//		err = res.Table().Render(os.Stdout, "markdown")
//	}
//
// # Servers
//
// Each server runs as its own process with a fresh temporary data
// directory, so that its CPU time (/proc/PID/stat) and resident set
// (/proc/PID/status) are its own: Strata as `strata serve --config FILE`
// (a generated file with db_path and [server] listen), etcd 3.4.23 (the
// binary; the last etcd with the v2 keys API, --enable-v2) and etcd 3.7
// (go.etcd.io/etcd/server/v3/embed, in the small program etcd37 beside this
// package). Every server keeps its defaults, fsync on every commit included.
//
// # Load
//
// The v2 rows run the HTTP load tool wrk (WrkRun): GET /v2/keys/foo, or
// PUT with the form value=aaa... from a Lua script; etcd's 2015 benchmark
// used hey, which costs several times wrk's CPU per request and so bounds
// what a pinned server can be shown to do. The v3 rows run V3Load, a
// closed-loop clientv3 generator shaped as etcd's tools/benchmark: the
// clients share a few gRPC connections and each sends its next request as
// soon as the last is answered. Every run is bounded in requests or time.
//
// # Figures
//
// The machine running a benchmark is usually shared. By default (see
// Pinning) each server runs on one CPU and the load tool on another, so
// the server has one core, as in a container with a CPU limit of 1, and
// its CPU time is not the load tool's. RunQPS makes several passes,
// each with freshly started servers, alternates which server goes first
// from row to row and pass to pass, and reports medians, Strata/etcd
// ratios from the same passes, and each server's CPU seconds per 1000
// requests beside wall-clock QPS.
package bench
