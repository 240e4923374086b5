package admin

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/workload"
)

const (
	// loadChildEnv names the directory of the load a crash-test child runs.
	loadChildEnv   = "STRATA_ADMIN_LOAD_CHILD_DIR"
	crashLines     = 20000
	crashBatchSize = 100
	committedLine  = "load: committed "
)

// TestLoadCrashChild is the child of TestLoadCrashSIGKILL: it runs
// "strata -v load --resume" on the parent's files, logging every committed
// batch to stderr. It does nothing in a normal run.
func TestLoadCrashChild(t *testing.T) {
	dir := os.Getenv(loadChildEnv)
	if dir == "" {
		t.Skip("only run as the child of TestLoadCrashSIGKILL")
	}
	root := NewRootCommand()
	root.SetArgs([]string{"--config", filepath.Join(dir, "strata.toml"), "-v",
		"load", filepath.Join(dir, "data.jsonl"), "--resume", "--batch-size", strconv.Itoa(crashBatchSize), "--progress", "never"})
	root.SetOut(os.Stdout)
	root.SetErr(os.Stderr)
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "load failed:", err)
		os.Exit(2)
	}
}

// TestLoadCrashSIGKILL kills a load with sync = true at a random batch, twice
// (the second time a resumed load), and checks after each kill that the
// entities present are a prefix of the file made of whole batches, holding
// every batch the child reported committed; a final --resume completes the
// set.
func TestLoadCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("STRATA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (replay with STRATA_CRASH_SEED)", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 2))

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "strata.toml")
	cfgText := fmt.Sprintf("db_path = %q\nsync = true\nmemtable_size_mb = 1\nblock_cache_size_mb = 8\n", filepath.Join(dir, "db"))
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	lines := make([][]byte, crashLines)
	for i := range lines {
		lines[i] = fmt.Appendf(nil, `{"id":%d,"ref":"r-%x","pad":%q}`, i, i*7919, strings.Repeat("p", i%61))
	}
	writeJSONL(t, dir, "data.jsonl", lines)

	present := 0
	for round := range 2 {
		// Kill once the child has reported k more batches committed.
		k := 1 + r.IntN(crashLines/crashBatchSize/3)
		delay := time.Duration(r.IntN(3000)) * time.Microsecond
		acked, finished := runLoadAndKill(t, dir, k, delay)
		got := checkPrefix(t, cfgPath, lines)
		switch {
		case got < acked:
			t.Fatalf("round %d: %d entities present, but the child reported %d committed", round, got, acked)
		case got < present:
			t.Fatalf("round %d: %d entities present, fewer than the %d before", round, got, present)
		case got%crashBatchSize != 0 && got != crashLines:
			t.Fatalf("round %d: %d entities present: not whole batches of %d", round, got, crashBatchSize)
		}
		t.Logf("round %d: killed %s after %d reported batches: %d entities present (%d reported committed, finished %v)",
			round, delay, k, got, acked, finished)
		present = got
	}

	out := mustRun(t, "--config", cfgPath, "load", filepath.Join(dir, "data.jsonl"), "--resume")
	if want := fmt.Sprintf("skipped %d entities", present); present > 0 && !strings.Contains(out, want) {
		t.Fatalf("resume output %q, want %q", out, want)
	}
	if got := checkPrefix(t, cfgPath, lines); got != crashLines {
		t.Fatalf("after the final resume, %d entities present, want %d", got, crashLines)
	}
}

// runLoadAndKill runs TestLoadCrashChild, SIGKILLs it delay after it has
// reported k committed batches (so the signal lands anywhere in a batch's
// building or commit) and returns the number of entities it reported committed
// (including any reported before the signal landed), and whether it
// finished before being killed.
func runLoadAndKill(t *testing.T, dir string, k int, delay time.Duration) (acked int, finished bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), loadChildEnv+"="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	batches := 0
	killed := false
	var other []string
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, committedLine)
		if !ok {
			other = append(other, line)
			continue
		}
		// "entity:00000000..entity:00000099": acked is one past the last.
		_, last, _ := strings.Cut(rest, "..")
		n, err := strconv.Atoi(strings.TrimPrefix(last, "entity:"))
		if err != nil {
			t.Fatalf("child: unexpected line %q", line)
		}
		acked = n + 1
		if batches++; batches == k && !killed {
			time.Sleep(delay)
			_ = cmd.Process.Kill() // SIGKILL; keep reading what it printed before dying
			killed = true
		}
	}
	werr := cmd.Wait()
	if !killed {
		if werr != nil {
			t.Fatalf("child failed: %v\n%s", werr, strings.Join(other, "\n"))
		}
		return acked, true
	}
	return acked, false
}

// checkPrefix opens the database and checks that the entity keys present
// are exactly entity:00000000..entity:N-1 with lines[0..N-1] as values. It
// returns N.
func checkPrefix(t *testing.T, cfgPath string, lines [][]byte) int {
	t.Helper()
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatalf("reopen after SIGKILL: %v", err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if want := workload.Key(n); !bytes.Equal(it.Key(), want) {
			t.Fatalf("key %d is %q, want %q: the entities present are not a prefix", n, it.Key(), want)
		}
		if n >= len(lines) || !bytes.Equal(it.Value(), lines[n]) {
			t.Fatalf("entity %d has value %q, want line %d", n, it.Value(), n+1)
		}
		n++
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return n
}
