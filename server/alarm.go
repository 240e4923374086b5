package server

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/protobuf/proto"

	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/mvcc"
)

// alarmStore is the members' alarms, etcd's v3alarm.AlarmStore: which
// member raised which alarm (NOSPACE, CORRUPT). An alarm is raised and
// cleared only by an AlarmRequest applied from the log (alarmStore.apply),
// so every member of a cluster holds the same set, and it is kept in the
// mvcc store's aux key space (etcd's alarm bucket) with the command's log
// index: it survives a restart and travels in raft snapshots (reload).
//
// While any member's NOSPACE alarm is raised, the applier refuses what
// etcd's capped applier refuses (capped): puts, txns with a put and lease
// grants. While any member's CORRUPT alarm is raised, it refuses what
// etcd's corrupt applier refuses (corruptRefused): every write.
type alarmStore struct {
	store *mvcc.Store
	log   engine.Logger
	// cause, if set, says why this member raised an alarm (the
	// spaceGuard's last finding, the first damage corruptWatch saw), for
	// the log line of its activation.
	cause func(member uint64, at pb.AlarmType) string

	mu     sync.Mutex
	alarms map[alarmKey]bool
	// noSpace is whether any NOSPACE alarm is raised: read by every write
	// the applier applies and by /health.
	noSpace atomic.Bool
	// corrupt is whether any CORRUPT alarm is raised: read by every
	// command the applier applies.
	corrupt atomic.Bool
}

type alarmKey struct {
	member uint64
	alarm  pb.AlarmType
}

// alarmAuxPrefix is the aux key space of the alarms: one key per alarm,
// "alarm/<member ID, 16 hex digits>/<type>", whose value is etcd's
// encoding of the alarm (pb.AlarmMember, as etcd's alarm bucket keys it).
const alarmAuxPrefix = "alarm/"

func alarmAuxKey(k alarmKey) []byte {
	return fmt.Appendf(nil, "%s%016x/%s", alarmAuxPrefix, k.member, k.alarm)
}

// newAlarmStore loads the alarms store keeps.
func newAlarmStore(store *mvcc.Store, log engine.Logger) (*alarmStore, error) {
	a := &alarmStore{store: store, log: log}
	return a, a.reload()
}

// reload reads the alarms again from the store: at start, and after a
// snapshot replaced the store's contents.
func (a *alarmStore) reload() error {
	kvs, err := a.store.ReadAux([]byte(alarmAuxPrefix))
	if err != nil {
		return err
	}
	alarms := map[alarmKey]bool{}
	for _, kv := range kvs {
		var m pb.AlarmMember
		if err := proto.Unmarshal(kv.Value, &m); err != nil {
			return fmt.Errorf("server: stored alarm %q: %w", kv.Key, err)
		}
		k := alarmKey{m.MemberID, m.Alarm}
		if string(alarmAuxKey(k)) != string(kv.Key) {
			return fmt.Errorf("server: stored alarm %q holds %v", kv.Key, &m)
		}
		alarms[k] = true
	}
	a.mu.Lock()
	a.alarms = alarms
	a.setFlagsLocked()
	a.mu.Unlock()
	return nil
}

func (a *alarmStore) setFlagsLocked() {
	ns, cr := false, false
	for k := range a.alarms {
		ns = ns || k.alarm == pb.AlarmType_NOSPACE
		cr = cr || k.alarm == pb.AlarmType_CORRUPT
	}
	a.noSpace.Store(ns)
	a.corrupt.Store(cr)
}

// get lists the alarms of type at (all of them for NONE), by member and
// type.
func (a *alarmStore) get(at pb.AlarmType) []*pb.AlarmMember {
	a.mu.Lock()
	out := make([]*pb.AlarmMember, 0, len(a.alarms))
	for k := range a.alarms {
		if at == pb.AlarmType_NONE || k.alarm == at {
			out = append(out, &pb.AlarmMember{MemberID: k.member, Alarm: k.alarm})
		}
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y *pb.AlarmMember) int {
		return cmp.Or(cmp.Compare(x.MemberID, y.MemberID), cmp.Compare(x.Alarm, y.Alarm))
	})
	return out
}

// has reports whether member raised alarm at.
func (a *alarmStore) has(member uint64, at pb.AlarmType) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.alarms[alarmKey{member, at}]
}

// apply applies an AlarmRequest at log position index, as etcd's
// applierV3backend.Alarm: ACTIVATE raises the alarm (answering it, also
// when it was raised already), DEACTIVATE clears it (answering it if it
// was raised), GET lists them. A change is written with the index; any
// other request records the index only. The alarm set changes once the
// write is durable, with one log line.
func (a *alarmStore) apply(index uint64, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	resp := &pb.AlarmResponse{Header: header(a.store.Rev())}
	k := alarmKey{r.MemberID, r.Alarm}
	a.mu.Lock()
	raised := a.alarms[k]
	a.mu.Unlock()
	var write *mvcc.AuxWrite
	switch r.Action {
	case pb.AlarmRequest_GET:
		resp.Alarms = a.get(r.Alarm)
	case pb.AlarmRequest_ACTIVATE:
		if r.Alarm == pb.AlarmType_NONE {
			break
		}
		resp.Alarms = []*pb.AlarmMember{{MemberID: k.member, Alarm: k.alarm}}
		if !raised {
			v, err := proto.Marshal(resp.Alarms[0])
			if err != nil {
				return nil, err
			}
			write = &mvcc.AuxWrite{Key: alarmAuxKey(k), Value: v}
		}
	case pb.AlarmRequest_DEACTIVATE:
		if raised {
			resp.Alarms = []*pb.AlarmMember{{MemberID: k.member, Alarm: k.alarm}}
			write = &mvcc.AuxWrite{Key: alarmAuxKey(k)}
		}
	}
	if write == nil {
		if index == 0 {
			return resp, nil
		}
		return resp, a.store.Entry(index).WriteAux(nil)
	}
	if err := a.store.Entry(index).WriteAux([]mvcc.AuxWrite{*write}); err != nil {
		return nil, err
	}
	a.mu.Lock()
	if write.Value != nil {
		a.alarms[k] = true
	} else {
		delete(a.alarms, k)
	}
	a.setFlagsLocked()
	a.mu.Unlock()
	a.logChange(k, write.Value != nil)
	return resp, nil
}

// logChange writes the one line of an alarm raised or cleared.
func (a *alarmStore) logChange(k alarmKey, raised bool) {
	if a.log == nil {
		return
	}
	if !raised {
		a.log.Infof("server: alarm %s of member %x cleared (disarmed)", k.alarm, k.member)
		return
	}
	var why []string
	if a.cause != nil {
		if c := a.cause(k.member, k.alarm); c != "" {
			why = append(why, c)
		}
	}
	if k.alarm == pb.AlarmType_NOSPACE {
		why = append(why, "puts, txns that write and lease grants fail with \"etcdserver: mvcc: database space exceeded\" until `etcdctl alarm disarm`")
	}
	if k.alarm == pb.AlarmType_CORRUPT {
		why = append(why, "writes fail with \"etcdserver: corrupt cluster\" until `etcdctl alarm disarm`, or, in a cluster, until this member has repaired itself from the leader (repair: lines follow)")
	}
	a.log.Errorf("server: alarm %s raised by member %x: %s", k.alarm, k.member, strings.Join(why, "; "))
}

// capped reports whether r is refused while a NOSPACE alarm is raised:
// etcd's applierV3Capped refuses a put, a txn whose branches put (at any
// depth) and a lease grant; deletes, compactions, lease revokes and the
// rest still apply.
func capped(r *pb.InternalRaftRequest) bool {
	switch {
	case r.Put != nil, r.LeaseGrant != nil:
		return true
	case r.Txn != nil:
		return txnPuts(r.Txn)
	}
	return false
}

// txnPuts reports whether a branch of r puts, nested txns included
// (etcd's quota cost of a txn is > 0).
func txnPuts(r *pb.TxnRequest) bool {
	return eachPut(r, func(*pb.PutRequest) error { return errStop }) != nil
}

var errStop = fmt.Errorf("stop")
