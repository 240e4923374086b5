package bench

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Pinning places a benchmark's server and its load tool on CPUs of their
// own, so that the server's CPU time and throughput are not those of a
// machine it shares with the load, and "one core" means one core: a Go
// server started on one CPU sets GOMAXPROCS to 1, as in a container with
// a CPU limit of 1. The zero Pinning pins nothing.
//
// Servers and load tools run as `taskset -c CPUS program ...` (taskset
// execs the program, so its process id is the program's); a load
// generator inside this process (V3Load) runs after PinSelf.
type Pinning struct {
	// Taskset is the taskset executable; "" pins nothing.
	Taskset string
	// ServerCPUs and LoadCPUs are CPU lists in taskset's -c form, such
	// as "0" or "0-1,3".
	ServerCPUs, LoadCPUs string
}

// DefaultServerCPUs and DefaultLoadCPUs are the CPUs DefaultPinning gives
// the server and the load tool.
const (
	DefaultServerCPUs = "0"
	DefaultLoadCPUs   = "1"
)

// DefaultPinning pins the server to CPU 0 and the load tool to CPU 1
// when taskset is installed and this process may run on both; otherwise
// it pins nothing and says why.
func DefaultPinning() (Pinning, string) {
	ts, err := exec.LookPath("taskset")
	if err != nil {
		return Pinning{}, "taskset not found (Debian: util-linux)"
	}
	p := Pinning{Taskset: ts, ServerCPUs: DefaultServerCPUs, LoadCPUs: DefaultLoadCPUs}
	if err := p.Validate(); err != nil {
		return Pinning{}, err.Error()
	}
	return p, ""
}

// Enabled says whether p pins anything.
func (p Pinning) Enabled() bool { return p.Taskset != "" }

// String says how the benchmark ran, for its output.
func (p Pinning) String() string {
	if !p.Enabled() {
		return "unpinned: server and load tool share every CPU"
	}
	return fmt.Sprintf("server pinned to CPU %s, load tool to CPU %s (taskset)", p.ServerCPUs, p.LoadCPUs)
}

// Validate checks that both CPU lists parse, name CPUs this process may
// run on, and do not overlap.
func (p Pinning) Validate() error {
	if !p.Enabled() {
		return nil
	}
	allowed, err := allowedCPUs()
	if err != nil {
		return err
	}
	srv, err := parseCPUList("server CPUs", p.ServerCPUs, allowed)
	if err != nil {
		return err
	}
	load, err := parseCPUList("load CPUs", p.LoadCPUs, allowed)
	if err != nil {
		return err
	}
	for _, c := range srv {
		if slices.Contains(load, c) {
			return fmt.Errorf("%w: server CPUs %q and load CPUs %q share CPU %d: they must be disjoint", ErrOptions, p.ServerCPUs, p.LoadCPUs, c)
		}
	}
	return nil
}

// allowedCPUs lists the CPUs this process may run on.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("bench: reading this process's CPU affinity: %w", err)
	}
	var out []int
	for c := range 1024 {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// parseCPUList parses a taskset -c list ("0", "0-2,5") of CPUs in
// allowed; what names the option in errors.
func parseCPUList(what, list string, allowed []int) ([]int, error) {
	bad := func(why string) error {
		return fmt.Errorf("%w: %s %q: %s (allowed: CPUs %s of this machine, as N, N-M or a comma-separated list)", ErrOptions, what, list, why, formatCPUs(allowed))
	}
	var out []int
	for part := range strings.SplitSeq(list, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, bad(fmt.Sprintf("%q is not a CPU number", part))
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, bad(fmt.Sprintf("%q is not a range N-M with N <= M", part))
			}
		}
		for c := a; c <= b; c++ {
			if !slices.Contains(allowed, c) {
				return nil, bad(fmt.Sprintf("CPU %d is not available", c))
			}
			out = append(out, c)
		}
	}
	return out, nil
}

func formatCPUs(cs []int) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// Command returns the command that runs name with args on cpus: taskset
// wrapping it when p is enabled and cpus is not empty, name itself
// otherwise.
func (p Pinning) Command(cpus, name string, args ...string) *exec.Cmd {
	if !p.Enabled() || cpus == "" {
		return exec.Command(name, args...)
	}
	return exec.Command(p.Taskset, append([]string{"-c", cpus, name}, args...)...)
}

// LoadThreads is how many threads a load tool should run: one per load
// CPU when pinned, one per CPU of this process otherwise.
func (p Pinning) LoadThreads() int {
	allowed, err := allowedCPUs()
	if err != nil || len(allowed) == 0 {
		return 1
	}
	if !p.Enabled() {
		return len(allowed)
	}
	cpus, err := parseCPUList("load CPUs", p.LoadCPUs, allowed)
	if err != nil {
		return 1
	}
	return len(cpus)
}

// PinSelf moves every thread of this process to the load tool's CPUs (a
// thread started later inherits its creator's CPUs) and returns the
// function that restores the CPUs they had. It is how a load generator
// running in this process (V3Load) is pinned.
func (p Pinning) PinSelf() (restore func() error, err error) {
	if !p.Enabled() {
		return func() error { return nil }, nil
	}
	allowed, err := allowedCPUs()
	if err != nil {
		return nil, err
	}
	cpus, err := parseCPUList("load CPUs", p.LoadCPUs, allowed)
	if err != nil {
		return nil, err
	}
	var before, pinned unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		return nil, err
	}
	for _, c := range cpus {
		pinned.Set(c)
	}
	restore = func() error { return setAllThreads(&before) }
	if err := setAllThreads(&pinned); err != nil {
		_ = restore()
		return nil, err
	}
	return restore, nil
}

// setAllThreads sets the CPU affinity of every thread of this process,
// listing the threads until a pass finds no new one (a thread created
// meanwhile by a thread not yet moved).
func setAllThreads(set *unix.CPUSet) error {
	done := map[int]bool{}
	for {
		tasks, err := filepath.Glob("/proc/self/task/*")
		if err != nil {
			return err
		}
		fresh := 0
		for _, t := range tasks {
			tid, err := strconv.Atoi(filepath.Base(t))
			if err != nil || done[tid] {
				continue
			}
			fresh++
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("bench: setting the CPUs of thread %d of this process: %w", tid, err)
			}
			done[tid] = true
		}
		if fresh == 0 {
			return nil
		}
	}
}
