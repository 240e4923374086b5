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
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveChildEnv+"=serve\n--db\n"+dir+"\n--listen\n"+testport.Addr(t))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadString('\n')
	m := servingLine.FindStringSubmatch(first)
	if err != nil || m == nil {
		t.Fatalf("first line %q, %v; stderr %s", first, err, stderr.String())
	}
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
		t.Fatalf("strata serve after SIGTERM: %v\nstdout %s\nstderr %s", err, rest, stderr.String())
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
