package bench

import (
	"fmt"
	"math"
	"strings"

	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/stats"
)

// summary is one row's medians on one server.
type summary struct {
	name                             string
	qps, p90ms, p99ms, cpu1k, load1k float64
	errors                           int
}

func (res *QPSResult) summarize(row QPSRow, k Kind) summary {
	var qps, p90, p99, cpu, load []float64
	s := summary{name: res.Names[k], qps: math.NaN(), p90ms: math.NaN(), p99ms: math.NaN(), cpu1k: math.NaN(), load1k: math.NaN()}
	for _, smp := range res.Samples {
		if smp.Row != row || smp.Kind != k {
			continue
		}
		qps = append(qps, smp.Result.QPS)
		p90 = append(p90, ms(smp.Result.P90))
		p99 = append(p99, ms(smp.Result.P99))
		cpu = append(cpu, smp.CPUPer1000())
		load = append(load, smp.LoadCPUPer1000())
		s.errors += smp.Result.Errors
	}
	if len(qps) > 0 {
		s.qps, s.p90ms, s.p99ms, s.cpu1k, s.load1k = stats.Median(qps), stats.Median(p90), stats.Median(p99), stats.Median(cpu), stats.Median(load)
	}
	return s
}

// Goals of the QPS table for Strata against its peer, in every row: at
// least the peer's QPS, and at most these fractions of its server CPU
// time per request.
const (
	GoalQPSRatio   = 1.0
	GoalCPUV3Read  = 0.4
	GoalCPUV3Write = 0.5
	GoalCPUV2      = 0.8
)

// goalCPU is the CPU ratio goal of row.
func goalCPU(row QPSRow) float64 {
	switch {
	case row.API == APIV2:
		return GoalCPUV2
	case row.Op == OpRead:
		return GoalCPUV3Read
	}
	return GoalCPUV3Write
}

// goal says whether a row meets the goals, "" where a ratio is missing.
func goal(row QPSRow, qpsRatio, cpuRatio float64) string {
	if math.IsNaN(qpsRatio) || math.IsNaN(cpuRatio) {
		return ""
	}
	var miss []string
	if qpsRatio < GoalQPSRatio {
		miss = append(miss, fmt.Sprintf("QPS < %.1fx", GoalQPSRatio))
	}
	if want := goalCPU(row); cpuRatio > want {
		miss = append(miss, fmt.Sprintf("CPU > %.1fx", want))
	}
	if len(miss) == 0 {
		return "met"
	}
	return "no: " + strings.Join(miss, ", ")
}

// Table is the QPS table: per row, the medians over the passes for Strata
// and its peer, their ratios, and etcd v2.1's 2015 figures for the row.
// Its notes say how the servers and the load tools were placed on CPUs.
func (res *QPSResult) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "API"}, {Name: "Op"}, {Name: "Value", Unit: "B"}, {Name: "Clients"},
		{Name: "Strata QPS", Format: "%.0f"},
		{Name: "Peer"},
		{Name: "Peer QPS", Format: "%.0f"},
		{Name: "QPS ratio", Format: "%.2fx"},
		{Name: "Strata p90", Unit: "ms", Format: "%.2f"},
		{Name: "Peer p90", Unit: "ms", Format: "%.2f"},
		{Name: "Strata p99", Unit: "ms", Format: "%.2f"},
		{Name: "Peer p99", Unit: "ms", Format: "%.2f"},
		{Name: "Strata CPU", Unit: "s/1k req", Format: "%.3f"},
		{Name: "Peer CPU", Unit: "s/1k req", Format: "%.3f"},
		{Name: "CPU ratio", Format: "%.2fx"},
		{Name: "Load tool CPU", Unit: "s/1k req", Format: "%.3f"},
		{Name: "Goal"},
		{Name: "etcd v2.1 2015 QPS", Format: "%.0f"},
		{Name: "etcd v2.1 2015 p90", Unit: "ms", Format: "%.1f"},
		{Name: "Errors"},
	}}
	for _, row := range res.Rows {
		st := res.summarize(row, KindStrata)
		pk := res.Options.peer(row.API)
		pe := res.summarize(row, pk)
		qr, cr := ratio(st.qps, pe.qps), ratio(st.cpu1k, pe.cpu1k)
		var seedQPS, seedP90 any
		if row.API == APIV2 {
			if f, ok := etcd21[seedKey{row.Op, row.ValueSize, row.Clients}]; ok {
				seedQPS, seedP90 = f.qps, f.p90ms
			}
		}
		peerName := pe.name
		if peerName == "" {
			peerName = string(pk)
		}
		t.Rows = append(t.Rows, []any{
			row.API, row.Op, row.ValueSize, row.Clients,
			cell(st.qps), peerName, cell(pe.qps), cell(qr),
			cell(st.p90ms), cell(pe.p90ms), cell(st.p99ms), cell(pe.p99ms),
			cell(st.cpu1k), cell(pe.cpu1k), cell(cr), cell(loadCPU(st, pe)),
			goal(row, qr, cr), seedQPS, seedP90, st.errors + pe.errors,
		})
	}
	o := res.Options
	t.Notes = []string{
		"CPUs: " + o.Pin.String() + ".",
		fmt.Sprintf("Medians of %d pass(es); each pass starts every server afresh, and the server that goes first alternates by row and pass.", o.Passes),
		fmt.Sprintf("v2: wrk on /v2/keys/%s (PUT form value= from a Lua script, GET), %s per run. v3: clientv3, closed loop, %d requests per run (%d with 1 client), %s reads, %s connections shared by the clients.",
			benchKey, o.Duration, o.Requests, o.SingleRequests, map[bool]string{true: "serializable", false: "linearizable"}[o.Serializable], connsText(o.Conns)),
		"Ratios are Strata / peer (QPS: higher is better; CPU: lower is better). CPU is the server process's user+system time per 1000 requests, from /proc; load tool CPU is wrk's or the v3 generator's (the mean of its medians on the two servers).",
		fmt.Sprintf("Goal, every row: QPS >= %.1fx the peer's; CPU ratio <= %.1f (v3 reads), %.1f (v3 writes), %.1f (v2). etcd v2.1 2015: 3 members, requests to the leader, other hardware.", GoalQPSRatio, GoalCPUV3Read, GoalCPUV3Write, GoalCPUV2),
	}
	return t
}

// loadCPU is the load tool's CPU per 1000 requests for a row: the mean
// of its medians on the two servers, or the one measured.
func loadCPU(a, b summary) float64 {
	switch {
	case math.IsNaN(a.load1k):
		return b.load1k
	case math.IsNaN(b.load1k):
		return a.load1k
	}
	return (a.load1k + b.load1k) / 2
}

func connsText(c int) string {
	if c == 0 {
		return "ceil(clients/16)"
	}
	return fmt.Sprint(c)
}

// RunsTable lists every run, for the spread behind the medians.
func (res *QPSResult) RunsTable() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Pass"}, {Name: "API"}, {Name: "Op"}, {Name: "Value", Unit: "B"}, {Name: "Clients"},
		{Name: "Server"}, {Name: "QPS", Format: "%.0f"}, {Name: "p90", Unit: "ms", Format: "%.2f"}, {Name: "p99", Unit: "ms", Format: "%.2f"},
		{Name: "CPU", Unit: "s/1k req", Format: "%.3f"}, {Name: "Load tool CPU", Unit: "s/1k req", Format: "%.3f"}, {Name: "Requests"}, {Name: "Errors"}, {Name: "Seconds", Format: "%.2f"},
	}}
	for _, s := range res.Samples {
		t.Rows = append(t.Rows, []any{
			s.Pass + 1, s.Row.API, s.Row.Op, s.Row.ValueSize, s.Row.Clients, s.Name,
			s.Result.QPS, ms(s.Result.P90), ms(s.Result.P99), cell(s.CPUPer1000()), cell(s.LoadCPUPer1000()), s.Result.Requests, s.Result.Errors, s.Result.Seconds,
		})
	}
	return t
}
