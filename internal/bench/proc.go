package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports (the kernel fixes it for
// user space, whatever CONFIG_HZ is).
const clockTicks = 100

// ProcCPU returns the CPU time, user plus system, in seconds that process
// pid has used so far, from /proc/PID/stat (Linux only).
func ProcCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: CPU time of pid %d needs /proc (Linux): %w", pid, err)
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and
// may hold spaces or parentheses, so fields are counted after the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat line %q: no ')' after the command name", truncate(b))
	}
	// After ")": field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(b[i+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("bench: /proc stat line %q: %d fields after the command name, want >= 13", truncate(b), len(rest))
	}
	var ticks uint64
	for _, f := range rest[11:13] {
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc stat line %q: utime/stime %q: %w", truncate(b), f, err)
		}
		ticks += n
	}
	return float64(ticks) / clockTicks, nil
}

// ProcRSS returns the resident set size in bytes of process pid, VmRSS in
// /proc/PID/status (Linux only), and its anonymous part, RssAnon: memory
// that is not a mapped file (the heap, stacks, C allocations). The rest is
// mapped files: the program's own code, and a database file read through
// mmap (etcd's bbolt).
func ProcRSS(pid int) (rss, anon int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("bench: RSS of pid %d needs /proc (Linux): %w", pid, err)
	}
	if rss, err = statusKB(b, "VmRSS"); err != nil {
		return 0, 0, err
	}
	if anon, err = statusKB(b, "RssAnon"); err != nil {
		return 0, 0, err
	}
	return rss, anon, nil
}

// statusKB finds "NAME: N kB" in a /proc/PID/status text and returns N KiB
// in bytes.
func statusKB(b []byte, name string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, name+":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("bench: /proc status line %q: want \"%s: N kB\"", line, name)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: /proc status line %q: %w", line, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("bench: no %s line in /proc status (a zombie process has none)", name)
}

func truncate(b []byte) string {
	const n = 120
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago: each is bound to 127.0.0.1:0 and released. Another process may take
// one in between; the server then fails to start and says so.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: finding a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
