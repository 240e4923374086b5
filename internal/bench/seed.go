package bench

// etcd21 holds etcd v2.1's QPS benchmark (2015, documented with etcd v2.1.0):
// hey against a 3-member cluster on GCE n1-highcpu-2 machines (2 CPUs, a
// local SSD), every request to the leader, one key, by operation, value
// size in bytes and clients. P90 is in milliseconds.
var etcd21 = map[seedKey]seedFigure{
	{"read", 64, 1}: {1534, 0.7}, {"read", 64, 64}: {10125, 9.1}, {"read", 64, 256}: {13892, 27.1},
	{"read", 256, 1}: {1530, 0.8}, {"read", 256, 64}: {10106, 10.1}, {"read", 256, 256}: {14667, 27.0},
	{"write", 64, 1}: {60, 21.4}, {"write", 64, 64}: {1742, 46.8}, {"write", 64, 256}: {3982, 90.5},
	{"write", 256, 1}: {58, 20.3}, {"write", 256, 64}: {1770, 47.8}, {"write", 256, 256}: {4157, 105.3},
}

type seedKey struct {
	op               string
	valueSize, users int
}

type seedFigure struct{ qps, p90ms float64 }
