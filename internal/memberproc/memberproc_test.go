package memberproc

import (
	"strings"
	"testing"
)

// TestMembersMustBePositive: a cluster of no members is refused with an
// error naming the field and the value, before anything is built.
func TestMembersMustBePositive(t *testing.T) {
	if _, err := StartStrata("/nonexistent", StrataOptions{Members: 0}); err == nil || !strings.Contains(err.Error(), "Members = 0") {
		t.Errorf("StartStrata with Members 0: %v, want an error naming Members = 0", err)
	}
	if _, err := StartEtcd37("/nonexistent", Etcd37Options{Members: -1}); err == nil || !strings.Contains(err.Error(), "Members = -1") {
		t.Errorf("StartEtcd37 with Members -1: %v, want an error naming Members = -1", err)
	}
}
