package bench

import (
	"fmt"
	"math"
	"slices"

	"github.com/stratadb/strata/internal/report"
)

// FloorTable sets the transport floor (KindFloor) beside Strata and its
// peer, per row: the server CPU per 1000 requests of each, and the
// floor's as a share of the peer's and of Strata's. A floor share of the
// peer above a row's CPU goal means the goal asks for less than the
// transport alone costs. Nil when the floor was not measured.
func (res *QPSResult) FloorTable() *report.Table {
	if !slices.Contains(res.Options.Servers, KindFloor) {
		return nil
	}
	t := &report.Table{Columns: append(res.rowColumns(),
		report.Column{Name: "Floor QPS", Format: "%.0f"},
		report.Column{Name: "Floor CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "Strata CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "Peer"},
		report.Column{Name: "Peer CPU", Unit: "s/1k req", Format: "%.3f"},
		report.Column{Name: "Floor / peer", Format: "%.2fx"},
		report.Column{Name: "Floor / Strata", Format: "%.2fx"},
		report.Column{Name: "Strata CPU goal", Format: "%.1fx"},
		report.Column{Name: "Room under the goal"},
		report.Column{Name: "Errors"},
	)}
	for _, row := range res.Rows {
		fl, st := res.summarize(row, KindFloor), res.summarize(row, KindStrata)
		pk := res.Options.peer(row.API)
		pe := res.summarize(row, pk)
		peerName := pe.name
		if peerName == "" {
			peerName = string(pk)
		}
		fp := ratio(fl.cpu1k, pe.cpu1k)
		t.Rows = append(t.Rows, append(res.rowCells(row),
			cell(fl.qps), cell(fl.cpu1k), cell(st.cpu1k), peerName, cell(pe.cpu1k),
			cell(fp), cell(ratio(fl.cpu1k, st.cpu1k)), goalCPU(row), room(goalCPU(row), fp), fl.errors+st.errors+pe.errors,
		))
	}
	t.Notes = []string{
		"Floor: the transport floor (internal/bench/floor), etcd's v3 Range and Put on grpc-go and the v2 GET and PUT on net/http, answered from a map in memory: no storage, no raft, no interceptors. What it costs is what the transport costs.",
		"CPU is the server process's user+system time per 1000 requests, from /proc, medians of the passes; shares are floor / peer and floor / Strata.",
		"Room under the goal: the goal (Strata CPU / peer CPU) less the floor's share of the peer, the share of the peer's CPU left for everything but the transport; none means the goal is below what the transport alone costs.",
	}
	return t
}

// room is what a CPU goal leaves above the floor's share of the peer's CPU.
func room(goal, floorShare float64) string {
	switch {
	case math.IsNaN(floorShare):
		return ""
	case floorShare >= goal:
		return fmt.Sprintf("none: floor is %.2fx", floorShare)
	}
	return fmt.Sprintf("%.2fx", goal-floorShare)
}
