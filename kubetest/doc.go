// Package kubetest runs Kubernetes' own storage conformance tests
// (k8s.io/apiserver/pkg/storage/testing, the RunTest* functions that
// k8s.io/apiserver's etcd3 store tests call) against a server started as a
// separate process: `strata serve` built from this repository, a 3-member
// Strata cluster with one member killed and restarted during the run,
// three `strata etcd` members run with the command line of kubeadm's etcd
// manifest for a stacked control plane (mutual TLS, joined as kubeadm
// joins them, kubelet's probes on the metrics URL throughout), or etcd
// 3.7.3 (internal/bench/etcd37) for comparison. It is a module of its own
// so that Strata's module does not depend on Kubernetes.
// TestKubeadmControlPlane runs a few of the tests in kubeadm mode in
// every run.
//
//	cd kubetest && go test ./...                          # one strata serve
//	STRATA_KUBETEST_SERVER=etcd37 go test ./...           # etcd 3.7.3, embed
//	STRATA_KUBETEST_SERVER=cluster go test ./...          # 3 members, one SIGKILLed
//	STRATA_KUBETEST_SERVER=kubeadm go test ./...          # kubeadm's 3 members, mutual TLS
//	STRATA_KUBETEST_ENDPOINTS=127.0.0.1:2379 go test ./... # a server already running
//
// docs/kubernetes.md lists which tests pass on each.
package kubetest
