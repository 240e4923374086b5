package bench

import (
	"testing"

	"github.com/stratadb/strata/internal/testport"
)

func TestFreePorts(t *testing.T) {
	ps, err := freePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || ps[0] == ps[1] || ps[1] == ps[2] || ps[0] == ps[2] {
		t.Errorf("ports %v: want 3 distinct", ps)
	}
	for _, p := range ps {
		if p < testport.Low || p > testport.High {
			t.Errorf("port %d: want %d-%d, below the ephemeral range", p, testport.Low, testport.High)
		}
	}
}
