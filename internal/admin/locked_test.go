package admin

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// holderEnv names, to TestHoldDatabaseChild, the database to hold open.
const holderEnv = "STRATA_HOLD_DB"

// TestHoldDatabaseChild opens the database named by holderEnv for writing,
// as `strata serve` does, says so on stdout and holds it until its stdin
// closes; otherwise it does nothing.
func TestHoldDatabaseChild(t *testing.T) {
	dir := os.Getenv(holderEnv)
	if dir == "" {
		t.Skip("runs only as a child of holdDatabase")
	}
	cfg := config.Default()
	cfg.DBPath = dir
	db, err := engine.Open(cfg)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = db.Close()
}

// holdDatabase opens dir for writing in another process, as a server
// would, until the test ends. A lock is per process (fcntl), so only
// another process shows what a user meets.
func holdDatabase(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldDatabaseChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "holding" {
		t.Fatalf("the holder did not open %s: %q", dir, line)
	}
}

// TestWriteToHeldDatabase: `strata put` (and every command that writes) on
// a database another process holds, such as `strata serve`, says the
// database is locked by another process and names the likely holders,
// rather than a bare "resource temporarily unavailable".
func TestWriteToHeldDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	mustRun(t, "--db", dir, "put", "k", "v")
	holdDatabase(t, dir)
	for _, args := range [][]string{{"put", "k", "v2"}, {"delete", "k"}, {"compact"}} {
		_, _, err := run(t, append([]string{"--db", dir}, args...)...)
		if err == nil {
			t.Fatalf("strata %s on a held database succeeded", strings.Join(args, " "))
		}
		for _, want := range []string{dir, "locked by another process", "strata serve"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("strata %s: %v: lacks %q", strings.Join(args, " "), err, want)
			}
		}
	}
	_, _, err := run(t, "--db", dir, "get", "k")
	if err == nil || !strings.Contains(err.Error(), "locked by another process") {
		t.Errorf("strata get on a held database: %v, want it locked by another process", err)
	}
}

// TestScanServerDatabase: `strata scan` on a `strata serve` store prints
// the keys and values a client put, at the latest revision (an overwritten
// value's new version, a deleted key gone), as etcdctl get would, not
// mvcc's binary records, and says what it does.
func TestScanServerDatabase(t *testing.T) {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(t.TempDir(), "db")
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []mvcc.Op{
		mvcc.PutOp([]byte("/app/a"), []byte("1")),
		mvcc.PutOp([]byte("/app/b"), []byte("2")),
		mvcc.PutOp([]byte("/app/a"), []byte("3")),
		mvcc.PutOp([]byte("/other"), []byte("x")),
		mvcc.DeleteOp([]byte("/app/b"), nil),
	} {
		if _, err := st.Txn(mvcc.TxnRequest{Success: []mvcc.Op{op}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run(t, "--db", cfg.DBPath, "scan")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/app/a\t3\n/other\tx\n"; out != want {
		t.Errorf("scan printed %q, want %q", out, want)
	}
	if !strings.Contains(stderr, "strata serve") || !strings.Contains(stderr, "etcdctl") {
		t.Errorf("scan's note %q does not say it read a server store", stderr)
	}
	out, _, err = run(t, "--db", cfg.DBPath, "scan", "--prefix", "/app/")
	if err != nil || out != "/app/a\t3\n" {
		t.Errorf("scan --prefix /app/ = %q, %v; want /app/a only", out, err)
	}
}

// TestStatsAfterCompact: `strata stats` right after `strata compact` (each
// its own process, as a user runs them) shows what the database holds
// first, tables in L6 with their codec, and then says its counters are
// this process's since it opened the database, rather than a bare
// "Compactions: 0".
func TestStatsAfterCompact(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "db")
	mustRun(t, "--db", db, "load", writeJSONL(t, dir, "data.jsonl", testLines(2000)))
	runStrata(t, "--db", db, "compact")
	out := runStrata(t, "--db", db, "stats")
	dbPart, procPart, ok := strings.Cut(out, "This process, since it opened the database")
	if !ok {
		t.Fatalf("stats does not say its counters are this process's:\n%s", out)
	}
	if !strings.Contains(procPart, "counters start at zero at every open") {
		t.Errorf("stats does not say the counters start at every open:\n%s", out)
	}
	l6 := regexp.MustCompile(`(?m)^\s*L6\s+([1-9]\d*)\s+([\d.]+)\s+[\d.]+\s+zstd\s+ZSTD\s+ZSTD:\d+\s+0\s*$`)
	if !l6.MatchString(dbPart) {
		t.Errorf("the database part lacks L6's tables, size and codecs first:\n%s", out)
	}
	if strings.Contains(dbPart, "Compactions:") || !strings.Contains(procPart, "Compactions: 0") {
		t.Errorf("Compactions is not under this process's counters:\n%s", out)
	}
}
