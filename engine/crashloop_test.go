package engine

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
	"syscall"
	"testing"
	"time"

	"github.com/stratadb/strata/config"
)

const (
	crashLoopDirEnv   = "STRATA_CRASH_LOOP_DIR"
	crashLoopStartEnv = "STRATA_CRASH_LOOP_START"
)

func crashLoopConfig(dir string) *config.Config {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(dir, "db")
	cfg.WALDir = filepath.Join(dir, "wal")
	cfg.Sync = true
	cfg.MemtableSizeMB, cfg.BlockCacheSizeMB = 1, 1
	return cfg
}

func loopKey(i int) []byte   { return fmt.Appendf(nil, "loop:%08d", i) }
func loopValue(i int) []byte { return bytes.Repeat([]byte(strconv.Itoa(i)+";"), 30) }

// TestCrashLoopChild is the child of TestCrashSIGKILLLoop: from the index
// in STRATA_CRASH_LOOP_START on, it puts key i only after key i-1 was
// acknowledged, with sync = true, and prints "ack i" after each; every
// 200th write it flushes, so the kills find tables as well as WAL. It does
// nothing in a normal run.
func TestCrashLoopChild(t *testing.T) {
	dir := os.Getenv(crashLoopDirEnv)
	if dir == "" {
		t.Skip("only run as the child of TestCrashSIGKILLLoop")
	}
	start, _ := strconv.Atoi(os.Getenv(crashLoopStartEnv))
	db, err := Open(crashLoopConfig(dir))
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := start; ; i++ {
		if err := db.Put(loopKey(i), loopValue(i)); err != nil {
			fmt.Println("write failed:", err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "ack %d\n", i)
		_ = out.Flush()
		if i%200 == 199 {
			if err := db.Flush(); err != nil {
				fmt.Println("flush failed:", err)
				os.Exit(2)
			}
		}
	}
}

// TestCrashSIGKILLLoop kills a child writing with sync = true again and
// again (100 kills, 10 under -short; STRATA_CRASH_KILLS sets another
// count) at random moments, each child continuing where the database
// stands. After every kill the database must hold exactly the acknowledged
// prefix: keys 0..acked all present with their values, no gap, nothing
// beyond the one write that may have been in flight.
func TestCrashSIGKILLLoop(t *testing.T) {
	kills := 100
	if testing.Short() {
		kills = 10
	}
	if s := os.Getenv("STRATA_CRASH_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("STRATA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (replay with STRATA_CRASH_SEED), %d kills", seed, kills)
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	dir := t.TempDir()
	next, inFlightLanded := 0, 0
	for kill := range kills {
		acked := runLoopChild(t, dir, next, time.Duration(10+r.IntN(120))*time.Millisecond)
		if acked < next-1 {
			acked = next - 1 // the child was killed before its first ack
		}
		db, err := Open(crashLoopConfig(dir))
		if err != nil {
			t.Fatalf("kill %d: reopen: %v", kill, err)
		}
		present, err := loopPrefix(db)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("kill %d: %v", kill, err)
		}
		switch {
		case present < acked+1:
			t.Fatalf("kill %d: %d keys present, but %d were acknowledged", kill, present, acked+1)
		case present > acked+2:
			t.Fatalf("kill %d: %d keys present, more than the %d acknowledged and the one in flight", kill, present, acked+1)
		case present == acked+2:
			inFlightLanded++
		}
		next = present
	}
	t.Logf("%d kills, %d writes acknowledged in all; the write in flight landed %d times", kills, next, inFlightLanded)
}

// loopPrefix returns how many loop keys are present, checking that they
// are exactly loopKey(0..n-1) with their values.
func loopPrefix(db *DB) (int, error) {
	it, err := db.NewIter(&IterOptions{LowerBound: []byte("loop:"), UpperBound: []byte("loop;")})
	if err != nil {
		return 0, err
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if !bytes.Equal(it.Key(), loopKey(n)) {
			_ = it.Close()
			return n, fmt.Errorf("key %q where %q was expected: a gap in the prefix", it.Key(), loopKey(n))
		}
		if !bytes.Equal(it.Value(), loopValue(n)) {
			_ = it.Close()
			return n, fmt.Errorf("key %q has a wrong value", it.Key())
		}
		n++
	}
	return n, it.Close()
}

// runLoopChild starts the child at index start, kills it with SIGKILL
// about d after its first acknowledgement and returns the last index it
// acknowledged (start-1 if none).
func runLoopChild(t *testing.T, dir string, start int, d time.Duration) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashLoopChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashLoopDirEnv+"="+dir, crashLoopStartEnv+"="+strconv.Itoa(start))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Killed d after the first acknowledgement, or after 30 s if the child
	// never gets there.
	killer := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	defer killer.Stop()
	sc := bufio.NewScanner(stdout)
	acked, first := start-1, true
	// Everything the child printed before it died was acknowledged.
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "ack "); ok {
			acked, _ = strconv.Atoi(n)
			if first {
				first = false
				killer.Reset(d)
			}
		} else if strings.Contains(line, "failed") {
			_ = cmd.Process.Kill()
			t.Fatalf("child: %s", line)
		}
	}
	_ = cmd.Wait()
	return acked
}
