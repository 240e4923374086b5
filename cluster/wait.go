package cluster

import (
	"bytes"
	"sync"
)

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
	m  map[uint64]waiter
}

// waiter is one pending proposal: where its result goes and, for a
// command, the entry data proposed and the command it was encoded from.
type waiter struct {
	ch   chan applyResult
	data []byte // the entry's data as proposed
	cmd  []byte // the proposer's command, data's body decoded
}

func newWaitRegistry() *waitRegistry {
	return &waitRegistry{m: map[uint64]waiter{}}
}

// register returns the channel the result for id will be sent on.
func (w *waitRegistry) register(id uint64) <-chan applyResult {
	return w.registerCommand(id, nil, nil)
}

// registerCommand is register for a command proposed as data, encoded
// from cmd: command hands cmd back to the apply while the proposer waits.
func (w *waitRegistry) registerCommand(id uint64, data, cmd []byte) <-chan applyResult {
	ch := make(chan applyResult, 1)
	w.mu.Lock()
	w.m[id] = waiter{ch: ch, data: data, cmd: cmd}
	w.mu.Unlock()
	return ch
}

// command returns the command its proposer gave for the entry data
// carrying id, nil if nobody waits on id or data is not what was
// proposed under it. The apply then skips decoding what this member
// encoded itself (the S2 decompression, and the state machine finds the
// very slice its proposer handed over, as on a single member). Comparing
// the bytes, rather than trusting the ID alone, keeps an entry from
// another life of this member (IDs start from the clock at each start)
// from ever being applied as a different command.
func (w *waitRegistry) command(id uint64, data []byte) []byte {
	w.mu.Lock()
	wt, ok := w.m[id]
	w.mu.Unlock()
	if !ok || wt.cmd == nil || !bytes.Equal(wt.data, data) {
		return nil
	}
	return wt.cmd
}

// trigger delivers r to the waiter of id, if any.
func (w *waitRegistry) trigger(id uint64, r applyResult) {
	w.mu.Lock()
	wt, ok := w.m[id]
	delete(w.m, id)
	w.mu.Unlock()
	if ok {
		wt.ch <- r
	}
}

// cancel forgets id.
func (w *waitRegistry) cancel(id uint64) {
	w.mu.Lock()
	delete(w.m, id)
	w.mu.Unlock()
}
