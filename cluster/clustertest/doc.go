// Package clustertest holds the end-to-end tests of Strata's replicated
// cluster: members run as `strata serve` processes on loopback ports (the
// test binary re-executes itself as strata), are killed with SIGKILL and
// restarted, and are checked through etcd's own client (clientv3), etcdctl
// and a linearizability checker (porcupine). It has no code of its own.
package clustertest
