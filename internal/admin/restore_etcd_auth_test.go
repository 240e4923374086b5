package admin

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// tryEtcdctl runs the stock etcdctl with args and returns its stdout and
// stderr together, and its error.
func tryEtcdctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	_, bin := etcdBinaries(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// setUpAuth makes, through etcdctl at endpoint, the root user, a role app
// that may read and write the prefix app/, the user alice with that role,
// enables auth and puts app/a and other/x as root.
func setUpAuth(t *testing.T, endpoint string) {
	t.Helper()
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"},
		{"role", "add", "app"},
		{"role", "grant-permission", "app", "--prefix=true", "readwrite", "app/"},
		{"user", "add", "alice:alicepw"},
		{"user", "grant-role", "alice", "app"},
		{"auth", "enable"},
		{"--user", "root:rootpw", "put", "app/a", "alice may read this"},
		{"--user", "root:rootpw", "put", "other/x", "alice may not"},
	} {
		etcdctl(t, append([]string{"--endpoints", endpoint}, args...)...)
	}
}

// requireAuth checks, through etcdctl at endpoint, the state setUpAuth
// made: alice reads app/ and is refused other/x, a request without a user
// is refused, root reads other/x.
func requireAuth(t *testing.T, endpoint string) {
	t.Helper()
	ep := []string{"--endpoints", endpoint}
	if out, err := tryEtcdctl(t, append(ep, "--user", "alice:alicepw", "get", "app/", "--prefix")...); err != nil || !strings.Contains(out, "alice may read this") {
		t.Errorf("alice get app/: %v\n%s", err, out)
	}
	if out, err := tryEtcdctl(t, append(ep, "--user", "alice:alicepw", "get", "other/x")...); err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("alice get other/x: %v\n%s, want permission denied", err, out)
	}
	if out, err := tryEtcdctl(t, append(ep, "get", "app/a")...); err == nil || !strings.Contains(out, "user name is empty") {
		t.Errorf("get without a user: %v\n%s, want user name is empty", err, out)
	}
	if out, err := tryEtcdctl(t, append(ep, "--user", "alice:wrong", "get", "app/a")...); err == nil || !strings.Contains(out, "authentication failed") {
		t.Errorf("alice with a wrong password: %v\n%s, want authentication failed", err, out)
	}
	if out, err := tryEtcdctl(t, append(ep, "--user", "root:rootpw", "get", "other/x")...); err != nil || !strings.Contains(out, "alice may not") {
		t.Errorf("root get other/x: %v\n%s", err, out)
	}
}

// snapshotAuthRevision returns the authRevision of the etcd snapshot file.
func snapshotAuthRevision(t *testing.T, file string) uint64 {
	t.Helper()
	db, err := bolt.Open(file, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rev uint64
	if err := db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket([]byte("auth")).Get([]byte("authRevision"))
		if len(v) != 8 {
			t.Fatalf("authRevision %x", v)
		}
		rev = binary.BigEndian.Uint64(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rev
}

// strataAuthStatus returns whether auth is enabled on the Strata server
// at endpoint and its auth revision, asked as root.
func strataAuthStatus(t *testing.T, endpoint string) (bool, uint64) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Username: "root", Password: "rootpw", DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := c.AuthStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return st.Enabled, st.AuthRevision
}

// TestRestoreAuthFromEtcd: an etcd 3.4 with auth enabled, a role on a
// prefix and a user with it, saved with etcdctl snapshot save and restored
// with strata restore, is served by Strata with the same users (their
// passwords), permissions, enabled flag and auth revision.
func TestRestoreAuthFromEtcd(t *testing.T) {
	etcdBinaries(t)
	e := startEtcd(t, filepath.Join(t.TempDir(), "etcd"), 0)
	setUpAuth(t, e.endpoint)
	snap := filepath.Join(t.TempDir(), "etcd.snap")
	etcdctl(t, "--endpoints", e.endpoint, "--user", "root:rootpw", "snapshot", "save", snap)
	e.stop(t)

	dir := filepath.Join(t.TempDir(), "restored")
	if out := mustRun(t, "--db", dir, "restore", snap); !strings.Contains(out, "; auth enabled, 2 users, 2 roles") {
		t.Errorf("restore printed %q", out)
	}
	s, _ := startServe(t, dir)
	requireAuth(t, s.Addr().String())
	enabled, rev := strataAuthStatus(t, s.Addr().String())
	if want := snapshotAuthRevision(t, snap); !enabled || rev != want {
		t.Errorf("auth status: enabled %t, revision %d; want enabled, revision %d as etcd's", enabled, rev, want)
	}
}

// TestExportAuthToEtcd goes back: a Strata server with auth enabled,
// written out by export-etcd and restored by etcdctl snapshot restore, is
// served by etcd 3.4 with alice's permissions.
func TestExportAuthToEtcd(t *testing.T) {
	etcdBinaries(t)
	dir := t.TempDir()
	s, _ := startServe(t, dir)
	setUpAuth(t, s.Addr().String())
	_, rev := strataAuthStatus(t, s.Addr().String())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "strata.snap")
	mustRun(t, "--db", dir, "export-etcd", out)
	if got := snapshotAuthRevision(t, out); got != rev {
		t.Errorf("exported auth revision %d, Strata's was %d", got, rev)
	}
	peer := loopbackPort(t)
	etcdDir := filepath.Join(t.TempDir(), "etcd")
	etcdctl(t, "snapshot", "restore", out, "--data-dir", etcdDir, "--name", "default",
		"--initial-cluster", "default="+etcdPeerURL(peer), "--initial-advertise-peer-urls", etcdPeerURL(peer))
	e := startEtcd(t, etcdDir, peer)
	requireAuth(t, e.endpoint)
}

// TestRestoreAuthFromStrataBackup: a backup of a Strata server with auth
// enabled (etcdctl snapshot save) restored by strata restore keeps the
// auth state too.
func TestRestoreAuthFromStrataBackup(t *testing.T) {
	etcdBinaries(t)
	s, _ := startServe(t, t.TempDir())
	setUpAuth(t, s.Addr().String())
	backup := filepath.Join(t.TempDir(), "strata.backup")
	etcdctl(t, "--endpoints", s.Addr().String(), "--user", "root:rootpw", "snapshot", "save", backup)

	dir := filepath.Join(t.TempDir(), "restored")
	mustRun(t, "--db", dir, "restore", backup)
	r, _ := startServe(t, dir)
	requireAuth(t, r.Addr().String())
}
