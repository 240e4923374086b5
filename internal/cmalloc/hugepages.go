package cmalloc

import (
	"os"
	"strings"
	"syscall"
)

// Huge pages for the C allocator's blocks.
//
// Pebble's memtables are C blocks of up to memtable_size_mb, and glibc
// maps every block that large afresh. Every 4 KiB page of a new memtable
// then costs a page fault the first time a write reaches it: on this
// project's 2-core VM, half of the CPU of a bulk load, about 16 µs per
// page (tune's 200 MB load, none/none: 116 MB per CPU-second, 221 with
// huge pages; RocksDB, whose arena blocks come back from glibc's heap,
// 121 and 130). glibc asks the kernel for transparent huge pages on the
// blocks it maps when its tunable glibc.malloc.hugetlb is 1, one fault per
// 2 MiB instead of 512. Tunables are read when the program starts, from
// GLIBC_TUNABLES, so ExecWithHugePages starts the program again with it.

// hugeTLBTunable is glibc's malloc tunable (2.35 and later): 1 makes
// malloc advise transparent huge pages (madvise MADV_HUGEPAGE) on the
// memory it maps and on the heap it grows.
const hugeTLBTunable = "glibc.malloc.hugetlb"

// envTunables is the environment variable glibc reads its tunables from,
// colon-separated name=value pairs.
const envTunables = "GLIBC_TUNABLES"

// thpEnabledFile holds the kernel's transparent huge page mode, the
// chosen one in brackets: "always [madvise] never".
const thpEnabledFile = "/sys/kernel/mm/transparent_hugepage/enabled"

// ExecWithHugePages replaces the running program by itself with
// glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES (same process ID,
// arguments and other environment), so that C blocks such as Pebble's
// memtables get transparent huge pages. It returns, saying why, when there
// is nothing to do: not glibc or too old a glibc, the tunable already
// set (by the operator, or by the exec that already happened), or the
// kernel's huge pages off. It returns the error when the exec fails; the
// program then goes on as it is. Call it first in main, before anything
// depends on the process's state.
func ExecWithHugePages() (reason string, err error) {
	if skip := hugePagesSkipped(os.Getenv(envTunables), thpMode); skip != "" {
		return skip, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	env := os.Environ()
	set := envTunables + "=" + withHugeTLB(os.Getenv(envTunables))
	replaced := false
	for i, kv := range env {
		if strings.HasPrefix(kv, envTunables+"=") {
			env[i], replaced = set, true
		}
	}
	if !replaced {
		env = append(env, set)
	}
	return "", syscall.Exec(exe, os.Args, env)
}

// hugePagesSkipped says why ExecWithHugePages has nothing to do, given
// GLIBC_TUNABLES and the kernel's mode (read only when the rest allows
// the exec: an exec'd program does not read it again), or "" when it
// should exec.
func hugePagesSkipped(tunables string, mode func() string) string {
	_, set := hugeTLBValue(tunables)
	switch {
	case !available:
		return "not glibc"
	case !hugeTLBKnown:
		return "glibc before 2.35"
	case set:
		return hugeTLBTunable + " from " + envTunables
	case !thpAllowed(mode()):
		return "transparent huge pages off in the kernel"
	}
	return ""
}

// HugePages says, for a startup line, whether the C allocator asks for
// huge pages in this process.
func HugePages() string {
	v, ok := hugeTLBValue(os.Getenv(envTunables))
	switch {
	case !available || !hugeTLBKnown || !ok:
		return "malloc huge pages off"
	case v != "1":
		return "malloc huge pages off (" + hugeTLBTunable + "=" + v + ")"
	case !thpAllowed(thpMode()):
		return "malloc huge pages off (the kernel's are)"
	}
	return "malloc huge pages on"
}

// thpAllowed reports whether the kernel's mode lets a program ask for
// transparent huge pages ("" when unknown: no).
func thpAllowed(mode string) bool { return mode == "always" || mode == "madvise" }

// hugeTLBValue is the value tunables gives glibc.malloc.hugetlb.
func hugeTLBValue(tunables string) (string, bool) {
	for _, kv := range strings.Split(tunables, ":") {
		if name, v, ok := strings.Cut(kv, "="); ok && name == hugeTLBTunable {
			return v, true
		}
	}
	return "", false
}

// withHugeTLB is tunables with glibc.malloc.hugetlb=1 added.
func withHugeTLB(tunables string) string {
	if tunables == "" {
		return hugeTLBTunable + "=1"
	}
	return tunables + ":" + hugeTLBTunable + "=1"
}

// thpMode is the kernel's transparent huge page mode (always, madvise or
// never), "" when it cannot be read.
func thpMode() string {
	b, err := os.ReadFile(thpEnabledFile)
	if err != nil {
		return ""
	}
	s := string(b)
	open, end := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if open < 0 || end < open {
		return ""
	}
	return s[open+1 : end]
}
