package cmalloc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// envChild marks the test binary re-run by TestExecWithHugePages: its
// TestMain calls ExecWithHugePages, as a program's main does.
const envChild = "STRATA_CMALLOC_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		if _, err := ExecWithHugePages(); err != nil {
			fmt.Fprintln(os.Stderr, "exec:", err)
			os.Exit(2)
		}
	}
	os.Exit(m.Run())
}

// TestExecWithHugePages checks the effect ExecWithHugePages is for: a
// program that calls it first gets its memtable-sized C blocks backed by
// huge pages, in the same process. The program is this test binary, run
// again with a clean GLIBC_TUNABLES; the child reports its PID before and
// after the exec, and how much of a 32 MiB block, every page written,
// the kernel backed with huge pages (AnonHugePages). With the tunable
// set to 0 by the operator, nothing is executed again and no huge pages
// appear, which shows the measure can tell.
func TestExecWithHugePages(t *testing.T) {
	if os.Getenv(envChild) != "" {
		reportHugeBlock(t)
		return
	}
	if !available || !hugeTLBKnown {
		t.Skip("not glibc 2.35 or later")
	}
	if m := thpMode(); !thpAllowed(m) {
		t.Skipf("the kernel's transparent huge pages are %q", m)
	}
	const block = 32 << 20
	on := runChild(t, "")
	if on.pid != on.startPID {
		t.Errorf("the exec changed the process: PID %d, started as %d", on.pid, on.startPID)
	}
	if on.tunables != hugeTLBTunable+"=1" {
		t.Errorf("child's GLIBC_TUNABLES = %q, want %s=1", on.tunables, hugeTLBTunable)
	}
	if on.huge < block/2 {
		t.Errorf("with huge pages: %d of the block's %d bytes in huge pages, want at least half", on.huge, block)
	}
	off := runChild(t, hugeTLBTunable+"=0")
	if off.tunables != hugeTLBTunable+"=0" {
		t.Errorf("the operator's GLIBC_TUNABLES became %q", off.tunables)
	}
	if off.huge != 0 {
		t.Errorf("with %s=0: %d bytes in huge pages, want none", hugeTLBTunable, off.huge)
	}
}

// childReport is what the child printed.
type childReport struct {
	startPID, pid int
	tunables      string
	huge          int
}

// runChild runs this test binary as the child, with GLIBC_TUNABLES set to
// tunables (unset when empty), and parses its report.
func runChild(t *testing.T, tunables string) childReport {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestExecWithHugePages$", "-test.v")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envTunables+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, envChild+"=1")
	if tunables != "" {
		env = append(env, envTunables+"="+tunables)
	}
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := cmd.Process.Pid
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	r := childReport{startPID: started, pid: -1, huge: -1}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, err := fmt.Sscanf(line, "child pid=%d huge=%d", &r.pid, &r.huge); err == nil {
			if _, v, ok := strings.Cut(line, "tunables="); ok {
				r.tunables = v
			}
		}
	}
	if r.pid < 0 {
		t.Fatalf("no report from the child:\n%s", out.String())
	}
	return r
}

// reportHugeBlock is the child's side: it writes a 32 MiB C block and
// prints how many more bytes the kernel backs with huge pages meanwhile.
func reportHugeBlock(t *testing.T) {
	before := anonHugePages(t)
	free := touchedBlock(32 << 20)
	after := anonHugePages(t)
	free()
	fmt.Printf("child pid=%d huge=%d tunables=%s\n", os.Getpid(), max(0, after-before), os.Getenv(envTunables))
}

// anonHugePages is the process's AnonHugePages in bytes, from
// /proc/self/smaps_rollup.
func anonHugePages(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "AnonHugePages:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no AnonHugePages in /proc/self/smaps_rollup")
	return 0
}

// TestHugePagesSkipped checks when ExecWithHugePages has nothing to do.
func TestHugePagesSkipped(t *testing.T) {
	if !available || !hugeTLBKnown {
		t.Skip("not glibc 2.35 or later")
	}
	for _, c := range []struct{ tunables, mode, want string }{
		{"", "madvise", ""},
		{"glibc.malloc.arena_max=2", "always", ""},
		{"glibc.malloc.hugetlb=0", "madvise", "glibc.malloc.hugetlb from GLIBC_TUNABLES"},
		{"glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1", "madvise", "glibc.malloc.hugetlb from GLIBC_TUNABLES"},
		{"", "never", "transparent huge pages off in the kernel"},
		{"", "", "transparent huge pages off in the kernel"},
	} {
		mode := func() string { return c.mode }
		if got := hugePagesSkipped(c.tunables, mode); got != c.want {
			t.Errorf("hugePagesSkipped(%q, %q) = %q, want %q", c.tunables, c.mode, got, c.want)
		}
	}
	if got := withHugeTLB("glibc.malloc.arena_max=2"); got != "glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1" {
		t.Errorf("withHugeTLB = %q", got)
	}
}
