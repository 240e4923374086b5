// Package robustness runs etcd's own robustness framework
// (go.etcd.io/etcd/tests/v3/robustness: its Kubernetes and etcd key-value
// traffic, its recording client, its linearizability and watch validators
// and its report) against three `strata serve` members, or three etcd
// 3.7.3 members for comparison, while members, the leader included, are
// killed with SIGKILL and restarted. It is a module of its own so that
// Strata's module does not depend on etcd's test tree. docs/robustness.md
// says how to run it and what passed.
package robustness
