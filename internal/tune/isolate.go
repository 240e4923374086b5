package tune

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/stratadb/strata/config"
)

// Runs in a process of their own.
//
// In one process the stores do not start equal: RocksDB's memtable arena
// is malloc'd in blocks that glibc hands back from what the earlier runs
// freed, while each Pebble memtable is a fresh mapping faulted in page by
// page, so RocksDB's write phase measured in the tune process costs about
// half of what it costs in a fresh one (docs/data/rocksdb-speed.md). With
// isolation each run re-executes this program, which rebuilds the data
// from its origin (the generator's parameters or the --input file),
// measures the one run and prints it: every store starts from a new
// process, as a user's program does.

// runChildEnv carries a childRequest to the child process.
const runChildEnv = "STRATA_TUNE_RUN"

// dataOrigin says how to build a Dataset again in another process: the
// generator's parameters, or the JSON Lines file it was read from.
type dataOrigin struct {
	Entities int    `json:"entities,omitempty"`
	Size     int    `json:"size,omitempty"`
	Seed     int64  `json:"seed,omitempty"`
	Path     string `json:"path,omitempty"`
}

// load builds the dataset again.
func (o dataOrigin) load() (*Dataset, error) {
	if o.Path != "" {
		return LoadDataset(o.Path)
	}
	return GenerateDataset(o.Entities, o.Size, o.Seed)
}

// childRequest is one run, as the parent hands it to the child.
type childRequest struct {
	Impl   Implementation `json:"impl"`
	Config string         `json:"config"` // the run's config, in JSON (config.Marshal)
	Data   dataOrigin     `json:"data"`
	// RawBytes is the data's size in the parent: a child that rebuilds
	// other data (an --input file changed meanwhile) refuses to measure.
	RawBytes  int64         `json:"raw_bytes"`
	OrderSeed int64         `json:"order_seed"`
	Absent    bool          `json:"absent,omitempty"`
	NoScan    bool          `json:"no_scan,omitempty"`
	MinTime   time.Duration `json:"min_time"`
}

// childLine is one line the child prints: progress units done, or the
// run's figures (the last line).
type childLine struct {
	Add int64 `json:"add,omitempty"`
	Run *Run  `json:"run,omitempty"`
}

// measureInChild performs spec in a fresh process of this program (which
// must call RunChildMain first thing, as cmd/tune's main and the package's
// TestMain do) and returns the run it measured. The read order is
// readOrder(len, orderSeed), as in the parent.
func measureInChild(ctx context.Context, spec runSpec, orderSeed int64) (Run, error) {
	cfgJSON, err := spec.cfg.Marshal(config.FormatJSON)
	if err != nil {
		return Run{}, err
	}
	req, err := json.Marshal(childRequest{
		Impl: spec.impl, Config: string(cfgJSON), Data: *spec.data.origin, RawBytes: spec.data.RawBytes(),
		OrderSeed: orderSeed, Absent: spec.absent, NoScan: spec.noScan, MinTime: spec.minTime,
	})
	if err != nil {
		return Run{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return Run{}, fmt.Errorf("tune: a run in its own process: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), runChildEnv+"="+string(req))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Run{}, err
	}
	if err := cmd.Start(); err != nil {
		return Run{}, fmt.Errorf("tune: start a run in its own process: %w", err)
	}
	run, readErr := readChild(out, orNop(spec.progress))
	_, _ = io.Copy(io.Discard, out) // after a bad line, so the child is not left blocked on a full pipe
	waitErr := cmd.Wait()
	if waitErr != nil {
		return Run{}, fmt.Errorf("tune: the %s run's process: %w: %s", spec.impl, waitErr, bytes.TrimSpace(stderr.Bytes()))
	}
	if readErr != nil {
		return Run{}, fmt.Errorf("tune: the %s run's process: %w", spec.impl, readErr)
	}
	return run, nil
}

// readChild forwards the child's progress to p and returns the run it
// printed last.
func readChild(r io.Reader, p Progress) (Run, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var run *Run
	for sc.Scan() {
		var line childLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return Run{}, fmt.Errorf("printed %q: %w", sc.Bytes(), err)
		}
		if line.Add > 0 {
			p.Add(line.Add)
		}
		if line.Run != nil {
			run = line.Run
		}
	}
	if err := sc.Err(); err != nil {
		return Run{}, err
	}
	if run == nil {
		return Run{}, errors.New("it printed no run")
	}
	return *run, nil
}

// RunChildMain performs the run that a parent's measureInChild asked for,
// if this process is such a child: it prints progress and the run as JSON
// lines to w and returns true, and the caller should exit (with status 1
// if err != nil). In any other process it returns false at once. Call it
// first thing in main, or in TestMain for a test binary.
func RunChildMain(ctx context.Context, w io.Writer) (bool, error) {
	enc, ok := os.LookupEnv(runChildEnv)
	if !ok {
		return false, nil
	}
	var req childRequest
	if err := json.Unmarshal([]byte(enc), &req); err != nil {
		return true, fmt.Errorf("tune: %s = %q: %w", runChildEnv, enc, err)
	}
	cfg, err := config.Parse([]byte(req.Config), config.FormatJSON)
	if err != nil {
		return true, err
	}
	data, err := req.Data.load()
	if err != nil {
		return true, err
	}
	if got := data.RawBytes(); got != req.RawBytes {
		return true, fmt.Errorf("tune: the data changed: %d bytes here, %d when the measurement began", got, req.RawBytes)
	}
	lines := json.NewEncoder(w)
	progress := &childProgress{enc: lines}
	run, err := measure(ctx, runSpec{
		impl: req.Impl, cfg: cfg, data: data, order: readOrder(data.Len(), req.OrderSeed),
		absent: req.Absent, noScan: req.NoScan, minTime: req.MinTime,
		progress: progress,
	})
	if err != nil {
		return true, err
	}
	progress.flush()
	return true, lines.Encode(childLine{Run: &run})
}

// childProgressEvery is how often a child prints its progress: measure
// reports every batch of the timed phases, and a line (a write to the
// parent's pipe) per batch would be the child's own work inside them.
const childProgressEvery = 100 * time.Millisecond

// childProgress prints a child's progress as JSON lines for its parent, at
// most once per childProgressEvery.
type childProgress struct {
	enc     *json.Encoder
	pending int64
	last    time.Time
}

func (*childProgress) Start(int64)     {}
func (*childProgress) Describe(string) {}

func (c *childProgress) Add(n int64) {
	c.pending += n
	if time.Since(c.last) >= childProgressEvery {
		c.flush()
	}
}

// flush prints the units added since the last line.
func (c *childProgress) flush() {
	if c.pending > 0 {
		_ = c.enc.Encode(childLine{Add: c.pending})
	}
	c.pending, c.last = 0, time.Now()
}
