package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	allowed := []int{0, 1, 2, 3}
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{"0", []int{0}, ""},
		{"1-3", []int{1, 2, 3}, ""},
		{"0,2-3", []int{0, 2, 3}, ""},
		{"4", nil, "CPU 4 is not available"},
		{"x", nil, `"x" is not a CPU number`},
		{"3-1", nil, `"3-1" is not a range`},
		{"", nil, "is not a CPU number"},
	} {
		got, err := parseCPUList("server CPUs", c.in, allowed)
		if c.err != "" {
			if !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "server CPUs") {
				t.Errorf("%q: err = %v, want one naming %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// tasksetOnTwoCPUs skips unless taskset exists and this process may run on
// CPUs 0 and 1.
func tasksetOnTwoCPUs(t *testing.T) Pinning {
	t.Helper()
	p, why := DefaultPinning()
	if why != "" {
		t.Skipf("cannot pin: %s", why)
	}
	return p
}

func TestPinningValidateOverlap(t *testing.T) {
	p := tasksetOnTwoCPUs(t)
	p.LoadCPUs = "0-1"
	if err := p.Validate(); !errors.Is(err, ErrOptions) || !strings.Contains(err.Error(), "share CPU 0") {
		t.Errorf("err = %v", err)
	}
	if err := (Pinning{}).Validate(); err != nil {
		t.Errorf("zero Pinning: %v", err)
	}
}

// TestPinningCommand starts a real process through Command and reads its
// CPUs back from /proc: taskset execs the program, so the pid is the
// program's and it runs where it was put.
func TestPinningCommand(t *testing.T) {
	p := tasksetOnTwoCPUs(t)
	for _, cpus := range []string{p.ServerCPUs, p.LoadCPUs} {
		cmd := p.Command(cpus, "sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// taskset execs sleep: wait until the pid runs sleep, pinned.
		var got, comm string
		for range 1000 {
			b, _ := os.ReadFile(filepath.Join("/proc", fmt.Sprint(cmd.Process.Pid), "comm"))
			if comm = strings.TrimSpace(string(b)); comm == "sleep" {
				break
			}
			_ = exec.Command("true").Run() // a pause that is not a sleep in the test
		}
		got, err := processCPUs(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil || comm != "sleep" || got != cpus {
			t.Errorf("pid runs %q on CPUs %q (%v), want sleep on %q", comm, got, err, cpus)
		}
	}
	if c := (Pinning{}).Command("0", "sleep", "1"); filepath.Base(c.Path) != "sleep" {
		t.Errorf("unpinned command runs %s", c.Path)
	}
}

// TestPinSelf moves every thread of the test process to the load CPUs and
// back.
func TestPinSelf(t *testing.T) {
	p := tasksetOnTwoCPUs(t)
	before := threadCPUs(t)
	restore, err := p.PinSelf()
	if err != nil {
		t.Fatal(err)
	}
	for tid, cpus := range threadCPUs(t) {
		if cpus != p.LoadCPUs {
			t.Errorf("thread %s on CPUs %q after PinSelf, want %q", tid, cpus, p.LoadCPUs)
		}
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	for tid, cpus := range threadCPUs(t) {
		if want, ok := before[tid]; ok && cpus != want {
			t.Errorf("thread %s on CPUs %q after restore, want %q", tid, cpus, want)
		}
	}
}

// threadCPUs maps each thread of this process to its Cpus_allowed_list.
func threadCPUs(t *testing.T) map[string]string {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, task := range tasks {
		if cpus, err := cpusAllowed(filepath.Join(task, "status")); err == nil {
			out[filepath.Base(task)] = cpus // else the thread ended
		}
	}
	return out
}

// processCPUs reads the CPUs process pid may run on, as /proc shows them.
func processCPUs(pid int) (string, error) {
	return cpusAllowed(fmt.Sprintf("/proc/%d/status", pid))
}

// cpusAllowed reads Cpus_allowed_list from a /proc status file.
func cpusAllowed(status string) (string, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no Cpus_allowed_list in %s", status)
}
