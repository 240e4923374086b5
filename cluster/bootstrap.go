package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The start-time checks: a member refuses to start when its config
// describes another cluster than the one its raft log records, or than the
// one its running peers belong to. Peers that do not answer are skipped
// (they may be starting too); a peer that answers and disagrees stops the
// start with an error that names both sides.

// checkRestart compares the config with what the raft log recorded.
func (n *raftNode) checkRestart(meta logMeta, members *memberSet) error {
	cfg := n.cfg
	if meta.Name != cfg.Name {
		return fmt.Errorf("cluster: name = %q, but the raft log in %s belongs to member %q (%x): use that member's config, or another directory", cfg.Name, cfg.Dir, meta.Name, meta.MemberID)
	}
	if members.Removed[meta.MemberID] {
		return fmt.Errorf("%w: member %q (%x) of cluster %x; wipe %s and add it again (member add, then start with join = true)", ErrRemoved, cfg.Name, meta.MemberID, meta.ClusterID, cfg.wipeDirs())
	}
	self := cfg.self()
	if me := members.Members[meta.MemberID]; me != nil && !sameURLs(me.PeerURLs, self.PeerURLs) && !n.peersKnowURLs(meta.ClusterID, meta.MemberID, self.PeerURLs) {
		return fmt.Errorf("cluster: members: %q has peer URLs %v in the config but %v in the cluster (%x): the cluster knows this member by its recorded URLs; fix the config, or remove and re-add the member with the new URL",
			cfg.Name, self.PeerURLs, me.PeerURLs, meta.ClusterID)
	}
	if err := n.checkPeers(meta.ClusterID, meta.MemberID, false); err != nil {
		return err
	}
	if !cfg.Join {
		want, cid := initialMembers(cfg)
		if cid != meta.ClusterID {
			return fmt.Errorf("cluster: members disagree with the cluster recorded in %s: the config describes cluster %x (%s, token %q) but this member belongs to cluster %x (%s now): start it with the member list the cluster was created with (or join = true for a member added later)",
				cfg.Dir, cid, describeMembers(want.list()), cfg.Token, meta.ClusterID, describeMembers(members.list()))
		}
	}
	return nil
}

// peersKnowURLs reports whether a running peer of the cluster lists
// member id with urls: its peer URLs were changed (member update) while it
// was down, after its own log recorded the old ones.
func (n *raftNode) peersKnowURLs(clusterID, id uint64, urls []string) bool {
	for _, v := range n.peerViews(time.Second) {
		if v.view.ClusterID != strconv.FormatUint(clusterID, 16) {
			continue
		}
		for _, m := range v.view.Members {
			if m.ID == id && sameURLs(m.PeerURLs, urls) {
				return true
			}
		}
	}
	return false
}

// checkPeersNew checks, before a new cluster's member records anything,
// that no running peer belongs to another cluster or has started this
// cluster without this member's log.
func (n *raftNode) checkPeersNew(members *memberSet) error {
	return n.checkPeers(n.clusterID, n.id, true)
}

func sameURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// checkPeers asks every other configured peer for its view.
func (n *raftNode) checkPeers(clusterID, selfID uint64, fresh bool) error {
	views := n.peerViews(time.Second)
	var errs []string
	for _, v := range views {
		cid, _ := strconv.ParseUint(v.view.ClusterID, 16, 64)
		if cid != clusterID {
			errs = append(errs, fmt.Sprintf("peer %q at %s belongs to cluster %x (%s), this member to cluster %x: the [[cluster.members]] lists (or tokens) differ between the members' configs",
				v.view.Name, v.url, cid, describeMembers(v.view.Members), clusterID))
			continue
		}
		if slices.Contains(v.view.Removed, strconv.FormatUint(selfID, 16)) {
			return fmt.Errorf("%w: peer %q at %s says member %q (%x) was removed from cluster %x; wipe %s and add it again (member add, then start with join = true)",
				ErrRemoved, v.view.Name, v.url, n.cfg.Name, selfID, clusterID, n.cfg.wipeDirs())
		}
		if self := strconv.FormatUint(selfID, 16); fresh && (slices.Contains(v.view.Started, self) || slices.Contains(v.view.Acked, self)) {
			errs = append(errs, fmt.Sprintf("peer %q at %s knows this member (%x) as started in cluster %x, but its raft directory %s is empty: a member that lost its data must be removed (member remove), wiped (%s), added again (member add) and started with join = true",
				v.view.Name, v.url, selfID, clusterID, n.cfg.Dir, n.cfg.wipeDirs()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: refusing to start member %q: %s", n.cfg.Name, strings.Join(errs, "; "))
	}
	return nil
}

type peerView struct {
	url  string
	view membersView
}

// peerViews fetches GET /raft/members from every configured member but
// this one, in parallel, each within timeout; peers that do not answer are
// left out.
func (n *raftNode) peerViews(timeout time.Duration) []peerView {
	var (
		mu  sync.Mutex
		out []peerView
		wg  sync.WaitGroup
	)
	for _, m := range n.cfg.Members {
		if m.Name == n.cfg.Name {
			continue
		}
		for _, u := range m.PeerURLs {
			wg.Add(1)
			go func(u string) {
				defer wg.Done()
				v, err := n.fetchView(u, timeout)
				if err != nil {
					return
				}
				mu.Lock()
				out = append(out, peerView{url: u, view: v})
				mu.Unlock()
			}(u)
		}
	}
	wg.Wait()
	return out
}

func (n *raftNode) fetchView(u string, timeout time.Duration) (membersView, error) {
	var v membersView
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+pathMembers, nil)
	if err != nil {
		return v, err
	}
	resp, err := n.tr.client.Do(req)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("%s", resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&v)
	return v, err
}

// join starts a member added at run time: the cluster ID, this member's ID
// and the member list come from a running member that lists this member's
// peer URL.
func (n *raftNode) join() error {
	if a := n.sm.AppliedIndex(); a != 0 {
		return fmt.Errorf("cluster: the state machine has already applied %d entries but the raft log in %s is empty: a joining member starts from empty data directories", a, n.cfg.Dir)
	}
	self := n.cfg.self()
	deadline := time.Now().Add(max(n.cfg.RequestTimeout, 10*time.Second))
	for {
		views := n.peerViews(time.Second)
		for _, v := range views {
			for _, m := range v.view.Members {
				if !sameURLs(m.PeerURLs, self.PeerURLs) {
					continue
				}
				cid, err := strconv.ParseUint(v.view.ClusterID, 16, 64)
				if err != nil {
					return fmt.Errorf("cluster: peer %s: bad cluster ID %q", v.url, v.view.ClusterID)
				}
				n.clusterID, n.id = cid, m.ID
				n.members = newMemberSet()
				for _, mm := range v.view.Members {
					mm := mm
					n.members.Members[mm.ID] = &mm
				}
				// Applied stays 0: the member list is rebuilt from the log
				// (or the leader's snapshot) as it replays.
				n.confState = &pb.ConfState{}
				n.logf("joining cluster %x as member %x (learnt from %s)", cid, m.ID, v.url)
				return n.log.bootstrap(logMeta{ClusterID: cid, MemberID: m.ID, Name: n.cfg.Name, Token: n.cfg.Token}, n.members)
			}
			if len(views) > 0 && time.Now().After(deadline.Add(-5*time.Second)) {
				return fmt.Errorf("cluster: join: no member of cluster %s lists peer URL %v: add this member first (etcdctl member add %s --peer-urls=%s)",
					v.view.ClusterID, self.PeerURLs, n.cfg.Name, strings.Join(self.PeerURLs, ","))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: join: no member of %s answered at its peer URL: a joining member needs a running cluster", memberNames(n.cfg.Members))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
