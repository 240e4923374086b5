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
	// GoalQPSCluster and GoalCPUCluster are the goals of every cluster
	// row, writes and reads through the leader or a follower, on the CPU
	// time of all members.
	GoalQPSCluster = 1.2
	GoalCPUCluster = 0.8
)

// goalQPS is the QPS ratio goal of row.
func goalQPS(row QPSRow) float64 {
	if row.Members > 1 {
		return GoalQPSCluster
	}
	return GoalQPSRatio
}

// goalCPU is the CPU ratio goal of row.
func goalCPU(row QPSRow) float64 {
	switch {
	case row.Members > 1:
		return GoalCPUCluster
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
	if want := goalQPS(row); qpsRatio < want {
		miss = append(miss, fmt.Sprintf("QPS < %.1fx", want))
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
	t := &report.Table{Columns: append(res.rowColumns(),
		report.Column{Name: "Strata QPS", Format: "%.0f"},
		report.Column{Name: "Peer"},
		report.Column{Name: "Peer QPS", Format: "%.0f"},
		report.Column{Name: "QPS ratio", Format: "%.2fx"},
		report.Column{Name: "Strata p90", Unit: "ms", Format: "%.2f"},
		report.Column{Name: "Peer p90", Unit: "ms", Format: "%.2f"},
		report.Column{Name: "Strata p99", Unit: "ms", Format: "%.2f"},
		report.Column{Name: "Peer p99", Unit: "ms", Format: "%.2f"},
		report.Column{Name: "Strata CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "Peer CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "CPU ratio", Format: "%.2fx"},
		report.Column{Name: "Load tool CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "Goal"},
		report.Column{Name: "etcd v2.1 2015 QPS", Format: "%.0f"},
		report.Column{Name: "etcd v2.1 2015 p90", Unit: "ms", Format: "%.1f"},
		report.Column{Name: "Errors"},
	)}
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
		t.Rows = append(t.Rows, append(res.rowCells(row),
			cell(st.qps), peerName, cell(pe.qps), cell(qr),
			cell(st.p90ms), cell(pe.p90ms), cell(st.p99ms), cell(pe.p99ms),
			cell(st.cpu1k), cell(pe.cpu1k), cell(cr), cell(loadCPU(st, pe)),
			goal(row, qr, cr), seedQPS, seedP90, st.errors+pe.errors,
		))
	}
	o := res.Options
	cpuWhose := "the server process's user+system time"
	if o.Members > 1 {
		cpuWhose = fmt.Sprintf("the user+system time of all %d members of the cluster, summed", o.Members)
	}
	t.Notes = []string{
		"CPUs: " + o.Pin.String() + ".",
		fmt.Sprintf("Medians of %d pass(es); each pass starts every server afresh, and the server that goes first alternates by row and pass.", o.Passes),
		fmt.Sprintf("v2: wrk on /v2/keys/%s (PUT form value= from a Lua script, GET), %s per run. v3: clientv3, closed loop, %d requests per run (%d with 1 client), %s reads (op read; read-serializable: serializable), %s connections shared by the clients.",
			benchKey, o.Duration, o.Requests, o.SingleRequests, map[bool]string{true: "serializable", false: "linearizable"}[o.Serializable], connsText(o.Conns)),
		fmt.Sprintf("Ratios are Strata / peer (QPS: higher is better; CPU: lower is better). CPU is %s per 1000 requests, from /proc, from quiet members until they are quiet again after the load (at most %s later), so a run pays for the flushes and compactions it leaves behind; load tool CPU is wrk's or the v3 generator's (the mean of its medians on the two servers).", cpuWhose, settleLimit),
	}
	if o.Members > 1 {
		t.Notes = append(t.Notes,
			fmt.Sprintf("Clusters: %d members of each server, all on the server CPUs, defaults of both (100 ms heartbeat, 1 s election timeout, fsync per commit); via leader or follower is the member that gets the requests.", o.Members),
			fmt.Sprintf("Goal, every row: QPS >= %.1fx the peer's; CPU ratio <= %.1f.", GoalQPSCluster, GoalCPUCluster))
		if n := res.leaderChanges(); n > 0 {
			t.Notes = append(t.Notes, fmt.Sprintf("%d run(s) saw the leader change (an election inside the run); see the runs table.", n))
		}
	} else {
		t.Notes = append(t.Notes, fmt.Sprintf("Goal, every row: QPS >= %.1fx the peer's; CPU ratio <= %.1f (v3 reads), %.1f (v3 writes), %.1f (v2). etcd v2.1 2015: 3 members, requests to the leader, other hardware.", GoalQPSRatio, GoalCPUV3Read, GoalCPUV3Write, GoalCPUV2))
	}
	return t
}

// rowColumns are the columns that name a row: the cluster's columns only
// on a table of clusters.
func (res *QPSResult) rowColumns() []report.Column {
	cols := []report.Column{{Name: "API"}, {Name: "Op"}, {Name: "Value", Unit: "B"}, {Name: "Clients"}}
	if res.Options.Members > 1 {
		cols = append(cols, report.Column{Name: "Members"}, report.Column{Name: "Via"})
	}
	return cols
}

// rowCells are row's cells of rowColumns.
func (res *QPSResult) rowCells(row QPSRow) []any {
	cells := []any{row.API, row.Op, row.ValueSize, row.Clients}
	if res.Options.Members > 1 {
		cells = append(cells, row.Members, row.Via)
	}
	return cells
}

// leaderChanges counts the runs during which a cluster's leader changed.
func (res *QPSResult) leaderChanges() int {
	n := 0
	for _, s := range res.Samples {
		if s.LeaderChanged {
			n++
		}
	}
	return n
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
	cluster := res.Options.Members > 1
	cols := append([]report.Column{{Name: "Pass"}}, res.rowColumns()...)
	cols = append(cols, report.Column{Name: "Server"})
	if cluster {
		cols = append(cols, report.Column{Name: "Member"}, report.Column{Name: "Member CPU", Unit: "s"}, report.Column{Name: "Leader changed"})
	}
	cols = append(cols,
		report.Column{Name: "QPS", Format: "%.0f"}, report.Column{Name: "p90", Unit: "ms", Format: "%.2f"}, report.Column{Name: "p99", Unit: "ms", Format: "%.2f"},
		report.Column{Name: "CPU", Unit: "s/1k req", Format: "%.3f"}, report.Column{Name: "Load tool CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "Requests"}, report.Column{Name: "Errors"}, report.Column{Name: "Seconds", Format: "%.2f"})
	t := &report.Table{Columns: cols}
	for _, s := range res.Samples {
		r := append([]any{s.Pass + 1}, res.rowCells(s.Row)...)
		r = append(r, s.Name)
		if cluster {
			r = append(r, s.Member, memberCPUText(s.MemberCPUSeconds), s.LeaderChanged)
		}
		t.Rows = append(t.Rows, append(r,
			s.Result.QPS, ms(s.Result.P90), ms(s.Result.P99), cell(s.CPUPer1000()), cell(s.LoadCPUPer1000()), s.Result.Requests, s.Result.Errors, s.Result.Seconds,
		))
	}
	return t
}

// memberCPUText lists each member's CPU seconds of a run, "0.41/0.22/0.23".
func memberCPUText(cpu []float64) string {
	parts := make([]string, len(cpu))
	for i, c := range cpu {
		parts[i] = fmt.Sprintf("%.2f", c)
	}
	return strings.Join(parts, "/")
}
