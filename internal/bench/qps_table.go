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
	name                      string
	qps, p90ms, cpu1k, load1k float64
	errors                    int
}

func (res *QPSResult) summarize(row QPSRow, k Kind) summary {
	var qps, p90, cpu, load []float64
	s := summary{name: res.Names[k], qps: math.NaN(), p90ms: math.NaN(), cpu1k: math.NaN(), load1k: math.NaN()}
	for _, smp := range res.Samples {
		if smp.Row != row || smp.Kind != k {
			continue
		}
		qps = append(qps, smp.Result.QPS)
		p90 = append(p90, ms(smp.Result.P90))
		cpu = append(cpu, smp.CPUPer1000())
		load = append(load, smp.LoadCPUPer1000())
		s.errors += smp.Result.Errors
	}
	if len(qps) > 0 {
		s.qps, s.p90ms, s.cpu1k, s.load1k = stats.Median(qps), stats.Median(p90), stats.Median(cpu), stats.Median(load)
	}
	return s
}

// Goals of the QPS table for Strata against its peer at 64 and more
// clients: QPS ratios at least these, p90 no worse.
const (
	GoalReadRatio  = 2.0
	GoalWriteRatio = 1.5
)

// goal says whether a row meets the goal, "" where none applies.
func goal(row QPSRow, qpsRatio, p90Ratio float64) string {
	if row.Clients < 64 || math.IsNaN(qpsRatio) {
		return ""
	}
	want := GoalWriteRatio
	if row.Op == OpRead {
		want = GoalReadRatio
	}
	var miss []string
	if qpsRatio < want {
		miss = append(miss, fmt.Sprintf("QPS < %.1fx", want))
	}
	if p90Ratio > 1 {
		miss = append(miss, "p90 worse")
	}
	if len(miss) == 0 {
		return "met"
	}
	return "no: " + strings.Join(miss, ", ")
}

// Table is the QPS table: per row, the medians over the passes for Strata
// and its peer, their ratios, and etcd v2.1's 2015 figures for the row.
func (res *QPSResult) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "API"}, {Name: "Op"}, {Name: "Value", Unit: "B"}, {Name: "Clients"},
		{Name: "Strata QPS", Format: "%.0f"},
		{Name: "Peer"},
		{Name: "Peer QPS", Format: "%.0f"},
		{Name: "QPS ratio", Format: "%.2fx"},
		{Name: "Strata p90", Unit: "ms", Format: "%.2f"},
		{Name: "Peer p90", Unit: "ms", Format: "%.2f"},
		{Name: "p90 ratio", Format: "%.2fx"},
		{Name: "Strata CPU", Unit: "s/1k req", Format: "%.3f"},
		{Name: "Peer CPU", Unit: "s/1k req", Format: "%.3f"},
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
		qr, pr := ratio(st.qps, pe.qps), ratio(st.p90ms, pe.p90ms)
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
			cell(st.p90ms), cell(pe.p90ms), cell(pr),
			cell(st.cpu1k), cell(pe.cpu1k), cell(loadCPU(st, pe)),
			goal(row, qr, pr), seedQPS, seedP90, st.errors + pe.errors,
		})
	}
	o := res.Options
	t.Notes = []string{
		fmt.Sprintf("Medians of %d pass(es); each pass starts every server afresh, and the server that goes first alternates by row and pass.", o.Passes),
		fmt.Sprintf("v2: hey on /v2/keys/%s (PUT form value=, GET), %d requests per run (%d with 1 client). v3: clientv3, closed loop, %s reads, %s connections shared by the clients.",
			benchKey, o.Requests, o.SingleRequests, map[bool]string{true: "serializable", false: "linearizable"}[o.Serializable], connsText(o.Conns)),
		"Ratios are Strata / peer (QPS: higher is better; p90: lower is better). CPU is the server process's user+system time per 1000 requests; load tool CPU is hey's or the v3 generator's, on the same cores (the mean of its medians on the two servers).",
		"Goal (64 and 256 clients): reads >= 2x and writes >= 1.5x the peer's QPS, p90 no worse. etcd v2.1 2015: 3 members, requests to the leader, other hardware.",
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
		{Name: "Server"}, {Name: "QPS", Format: "%.0f"}, {Name: "p90", Unit: "ms", Format: "%.2f"},
		{Name: "CPU", Unit: "s/1k req", Format: "%.3f"}, {Name: "Load tool CPU", Unit: "s/1k req", Format: "%.3f"}, {Name: "Requests"}, {Name: "Errors"}, {Name: "Seconds", Format: "%.2f"},
	}}
	for _, s := range res.Samples {
		t.Rows = append(t.Rows, []any{
			s.Pass + 1, s.Row.API, s.Row.Op, s.Row.ValueSize, s.Row.Clients, s.Name,
			s.Result.QPS, ms(s.Result.P90), cell(s.CPUPer1000()), cell(s.LoadCPUPer1000()), s.Result.Requests, s.Result.Errors, s.Result.Seconds,
		})
	}
	return t
}
