// Package etcddiff holds the differential test of package mvcc against
// etcd's own storage code: go.etcd.io/etcd/server/v3/storage/mvcc on bbolt,
// with etcd's lessor, driven through go.etcd.io/etcd/server/v3/etcdserver/txn
// as etcd's gRPC handlers do. The same random puts, ranges, delete-ranges,
// txns, compactions, leases and watches run against both in one process,
// and every result is compared: any difference fails the test.
//
// The etcd imports live only in the test, so mvcc itself never imports
// etcd. Run it (the seed is printed; replay with -seed, lengthen with
// -ops):
//
//	go test ./mvcc/etcddiff -run TestAgainstEtcd -v
//	go test ./mvcc/etcddiff -run TestAgainstEtcd -seed 42 -ops 200000
package etcddiff
