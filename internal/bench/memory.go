package bench

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stratadb/strata/internal/report"
)

// MemoryOptions configure RunMemory: each row is a combination of Keys,
// Versions, KeySizes and ValueSizes, loaded into each server through the
// v3 API as etcd's storage memory benchmark describes its store.
type MemoryOptions struct {
	// Servers are the servers to load. The default is KindStrata and
	// KindEtcd34.
	Servers []Kind
	// Keys, Versions, KeySizes and ValueSizes span the rows. The defaults
	// are etcd's 100K-key rows: 100,000 keys; 1 and 5 versions; 64-byte
	// keys; 256-byte and 1 KiB values. etcd's table also has 1,000,000
	// keys (long: minutes per server and row).
	Keys, Versions, KeySizes, ValueSizes []int
	// Clients is the number of concurrent writers. The default value is 64.
	Clients int
	// Conns is the number of gRPC connections they share; 0 means
	// ceil(clients/16).
	Conns int
	// Settle is the wait between the end of a load and the RSS reading.
	// The default value is 2 s.
	Settle time.Duration
	// LoadTimeout bounds each load. The default value is 30 minutes.
	LoadTimeout time.Duration
	// Programs are the servers' executables.
	Programs Programs
	// Dir is where the servers' data directories go; "" is os.TempDir().
	Dir string
	// Progress receives progress lines; nil is silent.
	Progress io.Writer
}

func (o *MemoryOptions) setDefaults() {
	if len(o.Servers) == 0 {
		o.Servers = []Kind{KindStrata, KindEtcd34}
	}
	if len(o.Keys) == 0 {
		o.Keys = []int{100_000}
	}
	if len(o.Versions) == 0 {
		o.Versions = []int{1, 5}
	}
	if len(o.KeySizes) == 0 {
		o.KeySizes = []int{64}
	}
	if len(o.ValueSizes) == 0 {
		o.ValueSizes = []int{256, 1024}
	}
	if o.Clients == 0 {
		o.Clients = 64
	}
	if o.Settle == 0 {
		o.Settle = 2 * time.Second
	}
	if o.LoadTimeout == 0 {
		o.LoadTimeout = 30 * time.Minute
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// minMemKeySize is the shortest key: 16 hex digits make keys distinct.
const minMemKeySize = 16

// Validate reports every bad option at once, after filling in defaults.
func (o *MemoryOptions) Validate() error {
	o.setDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrOptions}, args...)...))
	}
	for _, n := range o.Keys {
		if n < 1 || n > 100_000_000 {
			bad("keys %d: must be in [1, 100000000]", n)
		}
	}
	for _, v := range o.Versions {
		if v < 1 || v > 1000 {
			bad("versions %d: must be in [1, 1000]", v)
		}
	}
	for _, k := range o.KeySizes {
		if k < minMemKeySize || k > 1<<16 {
			bad("key size %d: must be in [%d, 65536]", k, minMemKeySize)
		}
	}
	for _, v := range o.ValueSizes {
		if v < 1 || v > 1<<20 {
			bad("value size %d: must be in [1, 1048576]", v)
		}
	}
	if o.Clients < 1 || o.Clients > 10_000 {
		bad("clients %d: must be in [1, 10000]", o.Clients)
	}
	if o.Conns < 0 || o.Conns > o.Clients {
		bad("conns %d: must be in [0, clients] (0 is ceil(clients/16))", o.Conns)
	}
	if o.Settle < 0 {
		bad("settle %s: must be >= 0", o.Settle)
	}
	if o.LoadTimeout <= 0 {
		bad("load timeout %s: must be > 0", o.LoadTimeout)
	}
	return errors.Join(errs...)
}

// MemoryRow is one row of the memory table.
type MemoryRow struct {
	Keys      int `json:"keys"`
	Versions  int `json:"versions"`
	KeySize   int `json:"key_size"`
	ValueSize int `json:"value_size"`
}

func (r MemoryRow) String() string {
	return fmt.Sprintf("%s keys x %d x %dB key x %dB value", countText(r.Keys), r.Versions, r.KeySize, r.ValueSize)
}

func countText(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return fmt.Sprint(n)
}

func (o *MemoryOptions) rows() []MemoryRow {
	var out []MemoryRow
	for _, vs := range o.ValueSizes {
		for _, ks := range o.KeySizes {
			for _, n := range o.Keys {
				for _, v := range o.Versions {
					out = append(out, MemoryRow{n, v, ks, vs})
				}
			}
		}
	}
	return out
}

// MemorySample is one row loaded into one server.
type MemorySample struct {
	Row  MemoryRow `json:"row"`
	Kind Kind      `json:"server"`
	Name string    `json:"name"`
	// RSSBytes is the server's VmRSS Settle after the load.
	RSSBytes int64 `json:"rss_bytes"`
	// AnonBytes is the anonymous part of RSSBytes (RssAnon): without the
	// program's code and mapped database files.
	AnonBytes int64 `json:"anon_bytes"`
	// LoadSeconds is the wall time of the load.
	LoadSeconds float64 `json:"load_seconds"`
	// CPUSeconds is the server's CPU time over the load.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// MemoryResult holds every sample of RunMemory.
type MemoryResult struct {
	Options MemoryOptions  `json:"-"`
	Rows    []MemoryRow    `json:"rows"`
	Samples []MemorySample `json:"samples"`
}

// memQuotaBytes is etcd's backend quota for the memory rows: its 2 GiB
// default is smaller than the largest rows (1M keys x 5 versions x 1 KiB),
// and 8 GiB is the most etcd accepts without a warning.
const memQuotaBytes = 8 << 30

// RunMemory loads every row into each server, each in a fresh process with
// an empty data directory, alternating which server goes first, and reads
// the server's RSS Settle after the load. On an error it returns the
// samples so far beside it.
func RunMemory(ctx context.Context, o MemoryOptions) (*MemoryResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	res := &MemoryResult{Options: o, Rows: o.rows()}
	total := len(res.Rows) * len(o.Servers)
	for ri, row := range res.Rows {
		for _, k := range rotate(o.Servers, ri) {
			fmt.Fprintf(o.Progress, "[%d/%d] %s into %s\n", len(res.Samples)+1, total, row, k)
			smp, err := o.loadOne(ctx, k, row)
			if err != nil {
				return res, fmt.Errorf("%s into %s: %w", row, k, err)
			}
			res.Samples = append(res.Samples, smp)
			fmt.Fprintf(o.Progress, "[%d/%d] %s into %s: RSS %.1f MB after %.1f s of load, %.1f CPU s\n",
				len(res.Samples), total, row, smp.Name, mb(smp.RSSBytes), smp.LoadSeconds, smp.CPUSeconds)
		}
	}
	return res, nil
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func (o *MemoryOptions) loadOne(ctx context.Context, k Kind, row MemoryRow) (smp MemorySample, err error) {
	s, err := StartServer(ctx, k, o.Programs, o.Dir, StartOptions{QuotaBytes: memQuotaBytes})
	if err != nil {
		return smp, err
	}
	defer func() {
		if serr := s.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()
	smp = MemorySample{Row: row, Kind: k, Name: s.Name}
	conns := o.Conns
	if conns == 0 {
		conns = (o.Clients + 15) / 16
	}
	values := make([]*memValues, o.Clients)
	for w := range values {
		values[w] = newMemValues(w, row.ValueSize)
	}
	var done atomic.Int64
	load := V3Load{
		Endpoint: s.Endpoint, Clients: o.Clients, Conns: conns,
		Total: row.Keys * row.Versions, Timeout: o.LoadTimeout, NoLatencies: true,
		// Request i writes key i mod N: all keys once, then all again,
		// so versions arrive round-robin.
		Op: func(ctx context.Context, kv clientv3.KV, w, i int) error {
			_, err := kv.Put(ctx, memKey(i%row.Keys, row.KeySize), values[w].next())
			done.Add(1)
			return err
		},
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				fmt.Fprintf(o.Progress, "  %s: %d/%d puts\n", s.Name, done.Load(), load.Total)
			}
		}
	}()
	cpu0, err := s.CPU()
	if err != nil {
		return smp, err
	}
	r, err := load.Run(ctx)
	if err != nil {
		return smp, err
	}
	if r.Errors > 0 || r.Requests != load.Total {
		return smp, fmt.Errorf("bench: load of %s: %d of %d puts succeeded, %d failed (timeout %s)", s.Name, r.Requests, load.Total, r.Errors, o.LoadTimeout)
	}
	cpu1, err := s.CPU()
	if err != nil {
		return smp, err
	}
	smp.LoadSeconds, smp.CPUSeconds = r.Seconds, cpu1-cpu0
	select {
	case <-time.After(o.Settle):
	case <-ctx.Done():
		return smp, ctx.Err()
	}
	smp.RSSBytes, smp.AnonBytes, err = s.RSS()
	return smp, err
}

// memKey is key number i, size bytes: 16 hex digits of a bijective
// scramble of i (so keys are distinct and arrive in random order, as
// etcd's users' keys do), padded with '/'.
func memKey(i, size int) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i)*0x9E3779B97F4A7C15+0x7F4A7C159E3779B9)
	return hex.EncodeToString(b[:]) + strings.Repeat("/", size-minMemKeySize)
}

// memValues makes one writer's values: pseudo-random bytes, so that
// Strata's block compression gains nothing etcd's uncompressed bbolt
// would not.
type memValues struct {
	r   *rand.Rand
	buf []byte
}

func newMemValues(worker, size int) *memValues {
	return &memValues{r: rand.New(rand.NewPCG(uint64(worker), 0x5eed)), buf: make([]byte, size)}
}

func (m *memValues) next() string {
	for j := 0; j < len(m.buf); j += 8 {
		x := m.r.Uint64()
		for b := 0; b < 8 && j+b < len(m.buf); b++ {
			m.buf[j+b] = byte(x >> (8 * b))
		}
	}
	return string(m.buf)
}

// Goal of the memory table: Strata's RSS at most this share of etcd's.
const GoalRSSShare = 1.0 / 3

var kindLabel = map[Kind]string{KindStrata: "Strata", KindEtcd34: "etcd 3.4", KindEtcd37: "etcd 3.7", KindFloor: "floor"}

// Table is the memory table: per row, each server's RSS and load time, and
// Strata's RSS against each etcd's.
func (res *MemoryResult) Table() *report.Table {
	var servers []Kind
	for _, k := range Kinds {
		if slices.Contains(res.Options.Servers, k) {
			servers = append(servers, k)
		}
	}
	cols := []report.Column{{Name: "Keys"}, {Name: "Versions"}, {Name: "Key", Unit: "B"}, {Name: "Value", Unit: "B"}}
	for _, k := range servers {
		cols = append(cols, report.Column{Name: kindLabel[k] + " RSS", Unit: "MB", Format: "%.1f"})
	}
	var peers []Kind
	if slices.Contains(servers, KindStrata) {
		for _, k := range servers {
			if k != KindStrata {
				peers = append(peers, k)
				cols = append(cols, report.Column{Name: "Strata / " + kindLabel[k], Format: "%.2f"})
			}
		}
		if len(peers) > 0 {
			cols = append(cols, report.Column{Name: "Goal"})
		}
	}
	for _, k := range servers {
		cols = append(cols, report.Column{Name: kindLabel[k] + " anon", Unit: "MB", Format: "%.1f"})
	}
	for _, k := range servers {
		cols = append(cols, report.Column{Name: kindLabel[k] + " load", Unit: "s", Format: "%.1f"})
	}
	t := &report.Table{Columns: cols}
	for _, row := range res.Rows {
		rss, anon, load := map[Kind]float64{}, map[Kind]float64{}, map[Kind]float64{}
		for _, k := range servers {
			rss[k], anon[k], load[k] = math.NaN(), math.NaN(), math.NaN()
		}
		for _, s := range res.Samples {
			if s.Row == row {
				rss[s.Kind], anon[s.Kind], load[s.Kind] = mb(s.RSSBytes), mb(s.AnonBytes), s.LoadSeconds
			}
		}
		cells := []any{countText(row.Keys), row.Versions, row.KeySize, row.ValueSize}
		for _, k := range servers {
			cells = append(cells, cell(rss[k]))
		}
		if len(peers) > 0 {
			var verdicts []string
			for _, k := range peers {
				r := ratio(rss[KindStrata], rss[k])
				cells = append(cells, cell(r))
				switch {
				case math.IsNaN(r):
				case r <= GoalRSSShare:
					verdicts = append(verdicts, "met vs "+kindLabel[k])
				default:
					verdicts = append(verdicts, "no vs "+kindLabel[k])
				}
			}
			cells = append(cells, strings.Join(verdicts, ", "))
		}
		for _, k := range servers {
			cells = append(cells, cell(anon[k]))
		}
		for _, k := range servers {
			cells = append(cells, cell(load[k]))
		}
		t.Rows = append(t.Rows, cells)
	}
	o := res.Options
	conns := o.Conns
	if conns == 0 {
		conns = (o.Clients + 15) / 16
	}
	t.Notes = []string{
		fmt.Sprintf("Each row loaded through the v3 API into a fresh server: N keys, then each again, until every key has its versions (round-robin), random values, %d clients on %d connections; RSS (VmRSS) %s after the load.", o.Clients, conns, o.Settle),
		"Goal: Strata's RSS at most 1/3 of etcd's. Anon is the RSS that is not a mapped file (RssAnon): without the program's code and etcd's memory-mapped bbolt file. MB = 1,048,576 bytes.",
	}
	return t
}
