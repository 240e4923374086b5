package procfs

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 130 0 0 20 0 8 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.8 {
		t.Errorf("cpu = %v, want 3.8 (250 + 130 ticks)", got)
	}
	for _, bad := range []string{"", "4242 (x S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 2a0 130 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestFieldKB(t *testing.T) {
	status := []byte("Name:\tetcd\nVmPeak:\t  900 kB\nVmRSS:\t   12345 kB\nRssAnon:\t    345 kB\nThreads:\t9\n")
	if got, err := fieldKB(status, "VmRSS", "status"); err != nil || got != 12345*1024 {
		t.Errorf("VmRSS = %d, %v; want %d", got, err, 12345*1024)
	}
	if got, err := fieldKB(status, "RssAnon", "status"); err != nil || got != 345*1024 {
		t.Errorf("RssAnon = %d, %v; want %d", got, err, 345*1024)
	}
	meminfo := []byte("MemTotal:       16318420 kB\nMemFree:         1234567 kB\n")
	if got, err := fieldKB(meminfo, "MemTotal", "meminfo"); err != nil || got != 16318420*1024 {
		t.Errorf("MemTotal = %d, %v", got, err)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := fieldKB([]byte(bad), "VmRSS", "status"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestSelf reads this process's own /proc files: CPU grows with work, and
// the resident memory is within the machine's.
func TestSelf(t *testing.T) {
	pid := os.Getpid()
	rss, anon, err := RSS(pid)
	if err != nil || anon <= 0 || anon > rss {
		t.Fatalf("RSS = %d, %d, %v: want 0 < anon <= rss", rss, anon, err)
	}
	total, err := MemTotal()
	if err != nil || total < rss {
		t.Fatalf("MemTotal = %d, %v: want at least the RSS %d", total, err, rss)
	}
	before, err := CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	after := before
	for round := 0; after < before+0.05; round++ {
		if round == 1000 {
			t.Fatalf("CPU time stayed at %v s through 10^10 additions", after)
		}
		for i := range 10_000_000 {
			x += i
		}
		if after, err = CPU(pid); err != nil {
			t.Fatal(err)
		}
	}
	_ = x
}

// TestCPUResolution checks that CPU counts below /proc/PID/stat's 10 ms
// ticks, so a short span of work (a list of 300 pods) reads as more than
// 0, and that it agrees with /proc/PID/stat.
func TestCPUResolution(t *testing.T) {
	pid := os.Getpid()
	prev, err := CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	smallest := 1.0
	x := 0
	for range 200 {
		for i := range 100_000 {
			x += i
		}
		now, err := CPU(pid)
		if err != nil {
			t.Fatal(err)
		}
		if step := now - prev; step > 0 && step < smallest {
			smallest = step
		}
		prev = now
	}
	_ = x
	if smallest >= 0.005 {
		t.Errorf("the smallest growth of CPU time seen was %.4f s: want steps below the 10 ms of /proc ticks", smallest)
	}
	stat, err := statCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := CPU(pid); now < stat-0.05 || now > stat+0.1 {
		t.Errorf("CPU = %.3f s, /proc/%d/stat says %.3f s: want them within a few ticks", now, pid, stat)
	}
}
