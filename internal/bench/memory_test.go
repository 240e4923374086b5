package bench

import (
	"errors"
	"strings"
	"testing"
)

func TestMemKey(t *testing.T) {
	seen := map[string]bool{}
	for i := range 10_000 {
		k := memKey(i, 64)
		if len(k) != 64 {
			t.Fatalf("key %d has %d bytes", i, len(k))
		}
		if seen[k] {
			t.Fatalf("key %d repeats", i)
		}
		seen[k] = true
	}
	if len(memKey(1, minMemKeySize)) != minMemKeySize {
		t.Error("shortest key")
	}
}

func TestMemValues(t *testing.T) {
	m := newMemValues(3, 1000)
	a, b := m.next(), m.next()
	if len(a) != 1000 || len(b) != 1000 || a == b {
		t.Errorf("values of %d and %d bytes, equal %v", len(a), len(b), a == b)
	}
}

func TestMemoryDefaultsAndValidate(t *testing.T) {
	o := MemoryOptions{}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	rows := o.rows()
	if len(rows) != 4 || rows[0] != (MemoryRow{100_000, 1, 64, 256}) || rows[3] != (MemoryRow{100_000, 5, 64, 1024}) {
		t.Errorf("rows %v", rows)
	}
	o = MemoryOptions{Keys: []int{0}, Versions: []int{0}, KeySizes: []int{8}, ValueSizes: []int{0}, Clients: 4, Conns: 5}
	err := o.Validate()
	if !errors.Is(err, ErrOptions) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"keys 0", "versions 0", "key size 8", "value size 0", "conns 5"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestMemoryTable(t *testing.T) {
	o := MemoryOptions{Servers: []Kind{KindStrata, KindEtcd34}, Keys: []int{1000}, Versions: []int{1}, ValueSizes: []int{256}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	res := &MemoryResult{Options: o, Rows: o.rows(), Samples: []MemorySample{
		{Row: o.rows()[0], Kind: KindStrata, RSSBytes: 30 << 20, AnonBytes: 20 << 20, LoadSeconds: 1},
		{Row: o.rows()[0], Kind: KindEtcd34, RSSBytes: 120 << 20, AnonBytes: 60 << 20, LoadSeconds: 2},
	}}
	tab := res.Table()
	want := []any{"1K", 1, 64, 256, 30.0, 120.0, 0.25, "met vs etcd 3.4", 20.0, 60.0, 1.0, 2.0}
	got := tab.Rows[0]
	if len(got) != len(want) {
		t.Fatalf("row %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("column %s = %v, want %v", tab.Columns[i].Name, got[i], want[i])
		}
	}
}
