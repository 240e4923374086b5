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

const crashChildEnv = "STRATA_CRASH_CHILD_DIR"

// TestCrashChild is the child of TestCrashSIGKILL: it writes with sync = true
// and prints "ack N" after write N returned. It does nothing in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("only run as the child of TestCrashSIGKILL")
	}
	cfg := crashConfig(dir)
	db, err := Open(cfg)
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if i%3 == 0 {
			// Every third step is a two-key batch: both or neither survive.
			b := db.NewBatch()
			_ = b.Put(crashKey(i), crashValue(i))
			_ = b.Put(append(crashKey(i), "/pair"...), crashValue(i))
			err = b.Commit()
		} else {
			err = db.Put(crashKey(i), crashValue(i))
		}
		if err != nil {
			fmt.Println("write failed:", err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "ack %d\n", i)
		_ = out.Flush()
		if i%500 == 499 {
			_ = db.Flush() // so the crash also finds tables, not only a WAL
		}
	}
}

func crashConfig(dir string) *config.Config {
	cfg := config.Default()
	cfg.DBPath = filepath.Join(dir, "db")
	cfg.WALDir = filepath.Join(dir, "wal")
	cfg.Sync = true
	cfg.MemtableSizeMB = 4
	cfg.BlockCacheSizeMB = 8
	return cfg
}

func crashKey(i int) []byte   { return []byte(fmt.Sprintf("crash:%08d", i)) }
func crashValue(i int) []byte { return bytes.Repeat([]byte(strconv.Itoa(i)+";"), 20) }

// TestCrashSIGKILL kills a child that writes with sync = true at a random
// moment and checks that every acknowledged write is present after reopen.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns child processes")
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("STRATA_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (replay with STRATA_CRASH_SEED)", seed)
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	dir := t.TempDir()
	for round := range 3 {
		acked := runAndKill(t, dir, time.Duration(100+r.IntN(700))*time.Millisecond)
		db, err := Open(crashConfig(dir))
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		for i := 0; i <= acked; i++ {
			v, err := db.Get(crashKey(i))
			if err != nil || !bytes.Equal(v, crashValue(i)) {
				t.Fatalf("round %d: acknowledged write %d (of %d) lost: %v", round, i, acked, err)
			}
			if i%3 == 0 {
				if _, err := db.Get(append(crashKey(i), "/pair"...)); err != nil {
					t.Fatalf("round %d: half of batch %d: %v", round, i, err)
				}
			}
		}
		// An unacknowledged batch is whole or absent.
		next := acked + 1
		if next%3 == 0 {
			_, e1 := db.Get(crashKey(next))
			_, e2 := db.Get(append(crashKey(next), "/pair"...))
			if (e1 == nil) != (e2 == nil) {
				t.Fatalf("round %d: torn batch %d", round, next)
			}
		}
		t.Logf("round %d: %d acknowledged writes survived", round, acked+1)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// runAndKill starts the child, lets it write for about d, kills it with
// SIGKILL and returns the last acknowledged write (-1 if none).
func runAndKill(t *testing.T, dir string, d time.Duration) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	acked := -1
	deadline := time.After(d)
	started := false
loop:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break loop
			}
			if n, found := strings.CutPrefix(line, "ack "); found {
				acked, _ = strconv.Atoi(n)
				started = true
			} else if strings.Contains(line, "failed") {
				t.Fatalf("child: %s", line)
			}
		case <-deadline:
			if !started {
				deadline = time.After(50 * time.Millisecond) // still opening
				continue
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			// Drain what the child printed before it died: those writes
			// were acknowledged too.
			for line := range lines {
				if n, found := strings.CutPrefix(line, "ack "); found {
					acked, _ = strconv.Atoi(n)
				}
			}
			break loop
		}
	}
	_ = cmd.Wait()
	return acked
}
