// Package procfs reads what Strata's measurements need to know about a
// process and the machine from Linux's /proc and the kernel's per-process
// CPU clocks: CPU time, resident memory and total memory. It is the one
// reader of those files, shared by the server benchmarks (internal/bench),
// the store rows of the key-index memory measurement (internal/indexmem)
// and tune memory's size check (internal/tune). On a system without /proc
// every function returns an error saying so.
package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (the kernel fixes it for
// user space, whatever CONFIG_HZ is).
const clockTicks = 100

// CPU returns the CPU time, user plus system, in seconds that process pid
// has used so far, exited threads included. It reads the kernel's CPU
// clock of the process (clock_gettime on the clock clock_getcpuclockid
// names), which counts nanoseconds: /proc/PID/stat counts 10 ms ticks, so
// a span of a few milliseconds (a list of 300 pods, a follower's share of
// 100 writes) would read as 0 or 10 ms. Where that clock cannot be read,
// it falls back to /proc/PID/stat.
func CPU(pid int) (float64, error) {
	if s, err := processClock(pid); err == nil {
		return s, nil
	}
	return statCPU(pid)
}

// processClock reads process pid's CPU clock. Its id is the one glibc's
// clock_getcpuclockid builds: the complement of the pid shifted left by
// three, with CPUCLOCK_SCHED (2), the scheduler's runtime, in the low bits
// and the per-thread bit (4) clear.
func processClock(pid int) (float64, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(int32((^pid)<<3|2), &ts); err != nil {
		return 0, fmt.Errorf("procfs: CPU clock of pid %d: %w", pid, err)
	}
	return float64(ts.Sec) + float64(ts.Nsec)/1e9, nil
}

// statCPU reads the CPU time of process pid from /proc/PID/stat.
func statCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("procfs: CPU time of pid %d needs /proc (Linux): %w", pid, err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line, quoted in errors up to 120 bytes. The command name
// (field 2) is in parentheses and may hold spaces or parentheses, so fields
// are counted after the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("procfs: /proc stat line %.120q: no ')' after the command name", b)
	}
	// After ")": field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(b[i+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("procfs: /proc stat line %.120q: %d fields after the command name, want >= 13", b, len(rest))
	}
	var ticks uint64
	for _, f := range rest[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procfs: /proc stat line %.120q: utime/stime %q: %w", b, f, err)
		}
		ticks += n
	}
	return float64(ticks) / clockTicks, nil
}

// RSS returns the resident set size in bytes of process pid, VmRSS in
// /proc/PID/status, and its anonymous part, RssAnon: memory that is not a
// mapped file (the heap, stacks, C allocations). The rest is mapped files:
// the program's own code, and a database file read through mmap (etcd's
// bbolt).
func RSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("procfs: RSS of pid %d needs /proc (Linux): %w", pid, err)
	}
	if rss, err = fieldKB(b, "VmRSS", "status"); err != nil {
		return 0, 0, err
	}
	if anon, err = fieldKB(b, "RssAnon", "status"); err != nil {
		return 0, 0, err
	}
	return rss, anon, nil
}

// MemTotal returns the machine's memory in bytes, MemTotal in
// /proc/meminfo.
func MemTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("procfs: total memory needs /proc (Linux): %w", err)
	}
	return fieldKB(b, "MemTotal", "meminfo")
}

// fieldKB finds "NAME: N kB" in the text of /proc/PID/status or
// /proc/meminfo (file names it in errors) and returns N KiB in bytes.
func fieldKB(b []byte, name, file string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("procfs: /proc %s line %q: want \"%s: N kB\"", file, line, name)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procfs: /proc %s line %q: %w", file, line, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("procfs: no %s line in /proc %s (a zombie process has none)", name, file)
}
