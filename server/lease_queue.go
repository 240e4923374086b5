package server

import (
	"container/heap"
	"time"
)

// expiryQueue holds when each lease expires, earliest first: etcd's
// LeaseQueue (server/lease/lease_queue.go), a binary heap with an index by
// ID, so the lessor's check looks only at the leases due, and a renewal
// moves one entry, O(log n) for n leases.
type expiryQueue struct {
	heap expiryHeap
	byID map[int64]*expiry
}

type expiry struct {
	id    int64
	at    time.Time
	index int // in heap
}

func newExpiryQueue() expiryQueue { return expiryQueue{byID: map[int64]*expiry{}} }

// set makes lease id expire at at.
func (q *expiryQueue) set(id int64, at time.Time) {
	if e := q.byID[id]; e != nil {
		e.at = at
		heap.Fix(&q.heap, e.index)
		return
	}
	e := &expiry{id: id, at: at}
	heap.Push(&q.heap, e)
	q.byID[id] = e
}

// remove forgets lease id.
func (q *expiryQueue) remove(id int64) {
	if e := q.byID[id]; e != nil {
		heap.Remove(&q.heap, e.index)
		delete(q.byID, id)
	}
}

// due returns the earliest lease if it expired before now.
func (q *expiryQueue) due(now time.Time) (int64, bool) {
	if len(q.heap) == 0 || !now.After(q.heap[0].at) {
		return 0, false
	}
	return q.heap[0].id, true
}

// when returns when lease id expires, false if it is not in the queue.
func (q *expiryQueue) when(id int64) (time.Time, bool) {
	e := q.byID[id]
	if e == nil {
		return time.Time{}, false
	}
	return e.at, true
}

// expiryHeap implements heap.Interface.
type expiryHeap []*expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*expiry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
