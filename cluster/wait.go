package cluster

import "sync"

// applyResult is what the apply goroutine hands to a waiting proposer.
type applyResult struct {
	result any
	err    error
}

// waitRegistry maps the IDs of this member's pending proposals to the
// channels their callers wait on. The apply goroutine triggers an ID when
// the entry carrying it is applied here; an ID nobody waits for (the caller
// gave up, or another member proposed it) is ignored.
type waitRegistry struct {
	mu sync.Mutex
	m  map[uint64]chan applyResult
}

func newWaitRegistry() *waitRegistry {
	return &waitRegistry{m: map[uint64]chan applyResult{}}
}

// register returns the channel the result for id will be sent on.
func (w *waitRegistry) register(id uint64) <-chan applyResult {
	ch := make(chan applyResult, 1)
	w.mu.Lock()
	w.m[id] = ch
	w.mu.Unlock()
	return ch
}

// trigger delivers r to the waiter of id, if any.
func (w *waitRegistry) trigger(id uint64, r applyResult) {
	w.mu.Lock()
	ch := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if ch != nil {
		ch <- r
	}
}

// cancel forgets id.
func (w *waitRegistry) cancel(id uint64) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}
