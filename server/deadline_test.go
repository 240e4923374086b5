package server

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestLazyDeadline checks that the request timeout's lazy context behaves
// as context.WithTimeout does for every way it ends: its deadline passing
// (seen by Err alone, and by a waiter on Done), cancel before and after a
// waiter, the parent's cancellation, and the earlier of two deadlines.
func TestLazyDeadline(t *testing.T) {
	old := requestTimeout
	requestTimeout = 50 * time.Millisecond
	t.Cleanup(func() { requestTimeout = old })
	bg := context.Background()

	// Err alone, never Done: the deadline still ends it.
	ctx, cancel := withRequestTimeout(bg)
	if err := ctx.Err(); err != nil {
		t.Fatalf("fresh: Err = %v", err)
	}
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > requestTimeout {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	time.Sleep(requestTimeout + 10*time.Millisecond)
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the deadline without Done: Err = %v, want %v", err, context.DeadlineExceeded)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("past the deadline: Done not closed")
	}
	cancel()

	// A waiter on Done is woken by the deadline.
	ctx, cancel = withRequestTimeout(bg)
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("waiting: Done not closed at the deadline")
	}
	if el := time.Since(start); el < requestTimeout-5*time.Millisecond {
		t.Fatalf("Done closed after %v, before the deadline %v", el, requestTimeout)
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waited: Err = %v", err)
	}
	cancel()

	// cancel before anyone waited, and after.
	for _, waitFirst := range []bool{false, true} {
		ctx, cancel = withRequestTimeout(bg)
		var done <-chan struct{}
		if waitFirst {
			done = ctx.Done()
		}
		cancel()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled (waiter first %v): Err = %v", waitFirst, err)
		}
		if done == nil {
			done = ctx.Done()
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("canceled (waiter first %v): Done not closed", waitFirst)
		}
	}

	// The parent's cancellation, seen by Err and by a waiter.
	for _, waitFirst := range []bool{false, true} {
		parent, pcancel := context.WithCancel(bg)
		ctx, cancel = withRequestTimeout(parent)
		var done <-chan struct{}
		if waitFirst {
			done = ctx.Done()
		}
		pcancel()
		if done == nil {
			done = ctx.Done()
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("parent canceled (waiter first %v): Done not closed", waitFirst)
		}
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("parent canceled (waiter first %v): Err = %v", waitFirst, err)
		}
		cancel()
	}

	// The earlier deadline wins; values pass through.
	type key struct{}
	parent, pcancel := context.WithTimeout(context.WithValue(bg, key{}, "v"), time.Millisecond)
	defer pcancel()
	ctx, cancel = withRequestTimeout(parent)
	defer cancel()
	if pd, _ := parent.Deadline(); func() bool { d, _ := ctx.Deadline(); return !d.Equal(pd) }() {
		t.Fatal("Deadline is not the parent's earlier one")
	}
	if ctx.Value(key{}) != "v" {
		t.Fatal("Value does not reach the parent")
	}
}

// TestLazyDeadlineConcurrent: Done, Err and cancel from many goroutines
// (run with -race).
func TestLazyDeadlineConcurrent(t *testing.T) {
	for range 100 {
		ctx, cancel := withRequestTimeout(context.Background())
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				switch i {
				case 0:
					cancel()
				case 1:
					<-ctx.Done()
				default:
					for ctx.Err() == nil {
						time.Sleep(time.Microsecond)
					}
				}
			}()
		}
		wg.Wait()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err = %v", ctx.Err())
		}
	}
}
