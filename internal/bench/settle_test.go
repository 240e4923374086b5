package bench

import (
	"context"
	"testing"
	"time"
)

// busyFor is a members' CPU reader whose members use a whole CPU each
// until busy reads have passed, then nothing.
func busyFor(busy int, members int) func() ([]float64, error) {
	reads := 0
	cpu := make([]float64, members)
	return func() ([]float64, error) {
		if reads > 0 && reads <= busy {
			for i := range cpu {
				cpu[i] += 0.01
			}
		}
		reads++
		return append([]float64(nil), cpu...), nil
	}
}

func TestSettleCountsTheWorkLeftBehind(t *testing.T) {
	s, err := settle(context.Background(), busyFor(3, 3), time.Millisecond, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Quiet {
		t.Fatalf("members quiet after 3 busy windows: settle says still busy after %s", s.Waited)
	}
	// Three busy windows of 0.01 s for each of 3 members.
	if got := s.CPU[0] + s.CPU[1] + s.CPU[2]; got < 0.089 || got > 0.091 {
		t.Errorf("CPU when quiet: %.3f s summed, want the 0.09 s used while busy", got)
	}
}

func TestSettleGivesUpAtTheLimit(t *testing.T) {
	s, err := settle(context.Background(), busyFor(1<<30, 1), time.Millisecond, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if s.Quiet || s.Waited < 20*time.Millisecond {
		t.Fatalf("members always busy: settle says quiet=%v after %s, want busy after the 20ms limit", s.Quiet, s.Waited)
	}
}
