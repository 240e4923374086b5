package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/testport"
	"github.com/stratadb/strata/mvcc"
)

// serveChildEnv makes the test binary run `strata` with the arguments
// in it (separated by newlines) instead of the tests.
const serveChildEnv = "STRATA_SERVE_CHILD_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(serveChildEnv); args != "" {
		root := admin.NewRootCommand()
		root.SetArgs(strings.Split(args, "\n"))
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "strata:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var servingLine = regexp.MustCompile(`serving etcd v2 and v3 APIs on https?://(\S+) `)

// TestServeSIGTERM runs `strata serve` in a child process, writes to it
// from 16 clients, sends SIGTERM, and checks that the server exits
// cleanly and every acknowledged write is in the store.
func TestServeSIGTERM(t *testing.T) {
	dir := t.TempDir()
	cmd, first, lines := startServeChild(t, dir, testport.Addr(t))
	m := servingLine.FindStringSubmatch(first)
	if !strings.Contains(first, ", sync true,") {
		t.Errorf("start-up line %q does not say sync true (serve's default)", first)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{m[1]}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	var mu sync.Mutex
	var acked []string
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; i < 10000; i++ {
				k := fmt.Sprintf("w%02d/%05d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := c.Put(ctx, k, k)
				cancel()
				if err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, k)
				mu.Unlock()
			}
		})
	}
	for n := 0; n < 200; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		n = len(acked)
		mu.Unlock()
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(lines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("strata serve after SIGTERM: %v\nstdout %s", err, rest)
	}
	if !strings.Contains(string(rest), "strata: stopped in") {
		t.Errorf("stdout after SIGTERM: %q", rest)
	}
	wg.Wait()

	cfg := config.ServeDefault()
	cfg.DBPath = dir
	db, err := engine.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, k := range acked {
		r, err := st.Range([]byte(k), nil, mvcc.RangeOptions{})
		if err != nil || len(r.KVs) != 1 || string(r.KVs[0].Value) != k {
			t.Fatalf("acknowledged key %s missing after SIGTERM (%d acknowledged): %+v, %v", k, len(acked), r, err)
		}
	}
	t.Logf("%d writes acknowledged before SIGTERM, all present", len(acked))
}

// startServeChild runs `strata serve` on dir in a child process and
// returns it with its start-up line and the rest of its stdout.
func startServeChild(t *testing.T, dir, addr string) (*exec.Cmd, string, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveChildEnv+"=serve\n--db\n"+dir+"\n--listen\n"+addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadString('\n')
	if err != nil || servingLine.FindStringSubmatch(first) == nil {
		t.Fatalf("first line %q, %v; stderr %s", first, err, stderr.String())
	}
	return cmd, first, lines
}

// TestServeRestartLoadsCheckpoint: `strata serve` stopped by SIGTERM
// writes the key index checkpoint (its last line says so), the next start
// says it loaded it and serves every key written before through clientv3;
// after more writes and a SIGKILL the next start says it rebuilt the index
// from the revisions, and serves the later writes too.
func TestServeRestartLoadsCheckpoint(t *testing.T) {
	dir, addr := t.TempDir(), testport.Addr(t)
	put := func(prefix string, n int) {
		t.Helper()
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range n {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err := c.Put(ctx, fmt.Sprintf("%s/%03d", prefix, i), "v")
			cancel()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(prefix string) int64 {
		t.Helper()
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := c.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return r.Count
	}

	cmd, first, lines := startServeChild(t, dir, addr)
	if !strings.Contains(first, "key index rebuilt from the revisions in") {
		t.Errorf("first start: %q", first)
	}
	put("a", 100)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(lines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
	if !strings.Contains(string(rest), "key index checkpoint written: 100 keys") {
		t.Errorf("stdout after SIGTERM: %q", rest)
	}

	cmd, first, _ = startServeChild(t, dir, addr)
	if !strings.Contains(first, "key index loaded from the checkpoint in") {
		t.Errorf("start after SIGTERM: %q", first)
	}
	if n := count("a"); n != 100 {
		t.Errorf("%d keys after the restart, want 100", n)
	}
	put("b", 50)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	_, first, _ = startServeChild(t, dir, addr)
	if !strings.Contains(first, "key index rebuilt from the revisions in") {
		t.Errorf("start after SIGKILL: %q", first)
	}
	if a, b := count("a"), count("b"); a != 100 || b != 50 {
		t.Errorf("after SIGKILL: %d and %d keys, want 100 and 50", a, b)
	}
}
