package cluster

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// MemberID returns the ID of a member of the cluster named by token, from
// its peer URLs (their order does not matter), as etcd derives member IDs
// from the peer URLs and the initial-cluster token. Every member computes
// the same IDs from the same [[cluster.members]] lists; salt is zero for
// the initial members and the proposal time for a member added at run time
// (so a re-added URL gets a fresh ID, as in etcd).
func MemberID(token string, peerURLs []string, salt uint64) uint64 {
	urls := slices.Clone(peerURLs)
	sort.Strings(urls)
	h := sha256.New()
	h.Write([]byte(strings.Join(urls, ",")))
	h.Write([]byte{0})
	h.Write([]byte(token))
	if salt != 0 {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], salt)
		h.Write(b[:])
	}
	id := binary.BigEndian.Uint64(h.Sum(nil)[:8])
	if id == 0 { // raft reserves 0 for "none"
		id = 1
	}
	return id
}

// ClusterID returns the ID of a cluster from the IDs of its initial
// members, as etcd does: the same on every member that starts from the
// same member list and token.
func ClusterID(memberIDs []uint64) uint64 {
	ids := slices.Clone(memberIDs)
	slices.Sort(ids)
	h := sha256.New()
	var b [8]byte
	for _, id := range ids {
		binary.BigEndian.PutUint64(b[:], id)
		h.Write(b[:])
	}
	return binary.BigEndian.Uint64(h.Sum(nil)[:8])
}

// checkPeerURL reports whether u is an http or https URL with a host and
// nothing else (no path, query or user), as peer and client URLs must be.
func checkPeerURL(u string) error {
	p, err := url.Parse(u)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if p.Scheme != "http" && p.Scheme != "https" {
		return fmt.Errorf("scheme %q: must be http or https", p.Scheme)
	}
	if p.Host == "" || p.Port() == "" {
		return fmt.Errorf("must name a host and a port, e.g. http://10.0.0.1:2380")
	}
	if (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.User != nil || p.Fragment != "" {
		return fmt.Errorf("must be scheme://host:port with no path, query or user")
	}
	return nil
}

// memberSet is the replicated member list: every member applies the same
// conf changes and attribute updates in log order, so every member's list
// agrees at each index. It is saved in the raft log store with the index of
// the last change applied to it (Applied), and carried in raft snapshots.
type memberSet struct {
	// Applied is the log index of the last entry applied to the set.
	Applied uint64 `json:"applied"`
	// Members by ID.
	Members map[uint64]*Member `json:"members"`
	// Removed holds the IDs of members removed from the cluster: their
	// messages are refused and they may not come back under that ID.
	Removed map[uint64]bool `json:"removed,omitempty"`
	// Started holds the IDs of members that have run and published their
	// name and client URLs through the log: a member with an empty raft
	// directory that the cluster knows as started has lost its data.
	Started map[uint64]bool `json:"started,omitempty"`
}

func newMemberSet() *memberSet {
	return &memberSet{Members: map[uint64]*Member{}, Removed: map[uint64]bool{}, Started: map[uint64]bool{}}
}

// clone returns a deep copy, safe to hand out while the set changes.
func (s *memberSet) clone() *memberSet {
	c := &memberSet{Applied: s.Applied, Members: make(map[uint64]*Member, len(s.Members)), Removed: make(map[uint64]bool, len(s.Removed)), Started: make(map[uint64]bool, len(s.Started))}
	for id, m := range s.Members {
		mm := *m
		mm.PeerURLs = slices.Clone(m.PeerURLs)
		mm.ClientURLs = slices.Clone(m.ClientURLs)
		c.Members[id] = &mm
	}
	for id := range s.Removed {
		c.Removed[id] = true
	}
	for id := range s.Started {
		c.Started[id] = true
	}
	return c
}

// list returns the members sorted by ID, as etcd's member list is
// (etcdctl member add prints its ETCD_INITIAL_CLUSTER line in this
// order).
func (s *memberSet) list() []Member {
	out := make([]Member, 0, len(s.Members))
	for _, m := range s.clone().Members {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// readyToAdd reports whether the cluster keeps a quorum of started
// voting members once one more (not yet started) voting member is added:
// etcd's strict reconfiguration check (--strict-reconfig-check, on by
// default). A second member added to a cluster of one is allowed, as in
// etcd (it is how a cluster restored from one member grows again).
func (s *memberSet) readyToAdd() (started, voters int, ok bool) {
	started, voters = s.startedVoters(0)
	voters++ // the member being added
	if started == 1 && voters == 2 {
		return started, voters, true
	}
	return started, voters, started >= voters/2+1
}

// readyToRemove reports whether the voting members left once id is
// removed hold a quorum of started members (etcd's check for a remove).
func (s *memberSet) readyToRemove(id uint64) (started, voters int, ok bool) {
	started, voters = s.startedVoters(id)
	return started, voters, started >= voters/2+1
}

// readyToPromote reports whether the voting members, with the learner
// promoted (and counted as started), hold a quorum of started members.
func (s *memberSet) readyToPromote() (started, voters int, ok bool) {
	started, voters = s.startedVoters(0)
	started, voters = started+1, voters+1
	return started, voters, started >= voters/2+1
}

// startedVoters counts the voting members but except, and the started
// ones among them.
func (s *memberSet) startedVoters(except uint64) (started, voters int) {
	for id, m := range s.Members {
		if id == except || m.IsLearner {
			continue
		}
		voters++
		if s.Started[id] {
			started++
		}
	}
	return started, voters
}

// learners counts the learner members.
func (s *memberSet) learners() int {
	n := 0
	for _, m := range s.Members {
		if m.IsLearner {
			n++
		}
	}
	return n
}

// checkPeerURLsFree returns ErrPeerURLExists if a member other than id
// has one of urls.
func (s *memberSet) checkPeerURLsFree(id uint64, urls []string) error {
	for _, u := range urls {
		if m := s.byPeerURL(u); m != nil && m.ID != id {
			return fmt.Errorf("%w: %s is the peer URL of member %q (%x)", ErrPeerURLExists, u, m.Name, m.ID)
		}
	}
	return nil
}

// get returns a copy of member id: the caller may set its fields (not
// change its URL slices in place) without touching the set.
func (s *memberSet) get(id uint64) (Member, bool) {
	if m, ok := s.Members[id]; ok {
		return *m, true
	}
	return Member{}, false
}

// byPeerURL returns the member that has peer URL u, if any.
func (s *memberSet) byPeerURL(u string) *Member {
	for _, m := range s.Members {
		if slices.Contains(m.PeerURLs, u) {
			return m
		}
	}
	return nil
}

func (s *memberSet) marshal() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

// marshalSnapshot returns the set as the data of a raft snapshot: the
// member list, and stateApplied, the state machine's applied index when
// the snapshot was taken. The state machine applies commands only, so its
// index stays behind the snapshot's when the last entries before it are
// not commands (a new leader's empty entry, member attributes, conf
// changes); a restarted member needs the commands up to stateApplied, not
// up to the snapshot's index (restart). Members that predate the field
// ignore it.
func (s *memberSet) marshalSnapshot(stateApplied uint64) []byte {
	b, err := json.Marshal(struct {
		*memberSet
		StateApplied uint64 `json:"state_applied"`
	}{s, stateApplied})
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return b
}

// snapshotStateApplied returns the state machine's applied index that a
// raft snapshot's data records (marshalSnapshot), and false for data
// written before it was recorded.
func snapshotStateApplied(b []byte) (uint64, bool, error) {
	if len(b) == 0 {
		return 0, false, nil
	}
	var d struct {
		StateApplied *uint64 `json:"state_applied"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return 0, false, fmt.Errorf("cluster: raft snapshot data: %w", err)
	}
	if d.StateApplied == nil {
		return 0, false, nil
	}
	return *d.StateApplied, true, nil
}

func unmarshalMemberSet(b []byte) (*memberSet, error) {
	s := newMemberSet()
	if len(b) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("cluster: member list: %w", err)
	}
	if s.Members == nil {
		s.Members = map[uint64]*Member{}
	}
	if s.Removed == nil {
		s.Removed = map[uint64]bool{}
	}
	if s.Started == nil {
		s.Started = map[uint64]bool{}
	}
	return s, nil
}

// describe renders members as "name=url,..." for error messages, the form
// an operator compares with the [[cluster.members]] of a config file.
func describeMembers(ms []Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("(unstarted %x)", m.ID)
		}
		parts = append(parts, name+"="+strings.Join(m.PeerURLs, "|"))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
