// Package dist holds what installs Strata where etcd is installed: the
// container image's Dockerfile (at the repository's root) and the systemd
// unit (dist/systemd). Its tests build and check them where the machine
// allows.
package dist

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratadb/strata/internal/testport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// buildStrata builds cmd/strata into dir and returns its path.
func buildStrata(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "strata")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/strata").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/strata: %v\n%s", err, out)
	}
	return bin
}

// TestSystemdUnit checks the unit with systemd-analyze verify, its
// ExecStart pointed at a built binary: any complaint fails (verify exits 0
// on a line it only ignores, such as an unknown Type=).
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed: the unit's syntax is not checked")
	}
	dir := t.TempDir()
	bin := buildStrata(t, dir)
	unit, err := os.ReadFile("systemd/strata.service")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/strata etcd", "ExecStart="+bin+" etcd", 1)
	if text == string(unit) {
		t.Fatal("the unit's ExecStart is not /usr/local/bin/strata etcd")
	}
	path := filepath.Join(dir, "strata.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), "strata.service") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestRunAsEtcd: the binary linked as etcd (as the image's
// /usr/local/bin/etcd is) takes etcd's command line: it refuses an unknown
// flag with etcd's nearest name, and serves with etcd's flags.
func TestRunAsEtcd(t *testing.T) {
	dir := t.TempDir()
	buildStrata(t, dir)
	etcd := filepath.Join(dir, "etcd")
	if err := os.Symlink("strata", etcd); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(etcd, "--listen-client-url", "http://127.0.0.1:1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "did you mean --listen-client-urls") {
		t.Fatalf("etcd --listen-client-url: %v\n%s", err, out)
	}

	addr := testport.Addr(t)
	url := "http://" + addr
	cmd := exec.Command(etcd, "--name", "s1", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", url, "--advertise-client-urls", url)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err = cli.Put(ctx, "k", "v"); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("put through the binary run as etcd: %v\n%s", err, log.String())
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get: %v %v", resp, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "strata")); err != nil {
		t.Fatalf("the store is not in --data-dir/strata: %v", err)
	}
}

// TestDockerfile builds the image where a Docker daemon answers (it needs
// the golang and distroless base images from their registries).
func TestDockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image is not built")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("docker is not installed: the image is not built")
	}
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker daemon answers, the image is not built: %s", lastLine(string(out)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "build", "-t", "strata-test", "..").CombinedOutput()
	if err != nil {
		t.Fatalf("docker build: %v\n%s", err, out)
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
