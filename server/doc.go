// Package server serves a Strata store over etcd's client APIs: the v3
// gRPC API (KV, Watch, Lease, Maintenance, Cluster, with etcd's own
// generated stubs) and the v2 keys API for single keys, both on one port,
// with /metrics, /health, /livez, /readyz and /version. `strata serve`
// runs it.
//
//	cfg, _ := config.LoadServe("strata.toml") // engine keys + [server]
//	s, err := server.Start(cfg, server.Options{})
//	if err != nil { ... }
//	fmt.Println("listening on", s.Addr())
//	...
//	_ = s.Close() // graceful: finishes requests in flight
//
// # Shape
//
// The server never writes to the store itself. Each write is encoded as
// etcd's InternalRaftRequest and proposed to a cluster.Node, which orders
// it and applies it through the server's cluster.StateMachine (applier,
// apply.go: batches of commands, one engine commit each) to the mvcc
// store; linearizable reads wait on the Node's
// ReadBarrier and then read mvcc. A single member runs cluster.Local; a
// raft cluster swaps in its Node (Options.NewNode or a [cluster] section)
// without any change here. Lease expiry is the leader's clock (lease.go),
// applied through the log.
//
// Errors are etcd's rpctypes errors wherever etcd has one, since clientv3
// matches them by message; errors.go's table says, once per error, its
// gRPC status and whether apply stops the node for it. See docs/server.md for what is
// served, the limits and the memory budget.
package server
