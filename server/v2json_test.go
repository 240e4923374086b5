package server

import (
	"encoding/json"
	"testing"
)

// v2EventCases are events with every kind of string encoding/json
// escapes, every omitempty field set and unset, and no node.
func v2EventCases() []*v2Event {
	strs := []string{"", "/foo", "a\"b\\c", "<script>&amp;</script>", "\b\f\n\r\t\x00\x01\x1f\x7f",
		"héllo wörld ✓ 𝄞", "bad \xff\xfe utf8 \xc3", "line\u2028sep\u2029par", "\xe2\x80", string(make([]byte, 64))}
	var evs []*v2Event
	for i, s := range strs {
		v := strs[(i+3)%len(strs)]
		n := &v2Node{Key: s, Value: &v, ModifiedIndex: int64(i), CreatedIndex: int64(i * 7)}
		evs = append(evs, &v2Event{Action: s, Node: n})
		evs = append(evs, &v2Event{Action: "set", Node: &v2Node{Key: s}, PrevNode: n})
	}
	empty := ""
	evs = append(evs, &v2Event{Action: "get"}, &v2Event{Action: "delete", Node: &v2Node{Key: "/k", Value: &empty, ModifiedIndex: -1}})
	return evs
}

// TestV2EventJSON holds v2Event.appendJSON to json.Marshal's bytes.
func TestV2EventJSON(t *testing.T) {
	for _, ev := range v2EventCases() {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON(%+v)\n got %s\nwant %s", ev, got, want)
		}
	}
}

// FuzzV2EventJSON compares appendJSON with json.Marshal on arbitrary
// strings and indexes.
func FuzzV2EventJSON(f *testing.F) {
	for _, ev := range v2EventCases() {
		v := ""
		if ev.Node != nil && ev.Node.Value != nil {
			v = *ev.Node.Value
		}
		f.Add(ev.Action, v, int64(3), true)
	}
	f.Fuzz(func(t *testing.T, a, v string, idx int64, prev bool) {
		ev := &v2Event{Action: a, Node: &v2Node{Key: v, Value: &a, ModifiedIndex: idx, CreatedIndex: -idx}}
		if prev {
			ev.PrevNode = &v2Node{Key: a, Value: &v, ModifiedIndex: idx / 2}
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.appendJSON(nil); string(got) != string(want) {
			t.Errorf("appendJSON\n got %s\nwant %s", got, want)
		}
	})
}
