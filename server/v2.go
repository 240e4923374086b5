package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/stratadb/strata/cluster"
)

// The v2 keys API serves single keys of the same store the v3 API
// serves: v2 key /foo is store key "/foo", modifiedIndex is its
// mod_revision, createdIndex its create_revision, and X-Etcd-Index the
// store revision. Directories, TTLs, in-order keys and waits answer a
// clear "not supported" error (errorCode 209, 400).
const v2KeysPrefix = "/v2/keys"

// v2 error codes and messages (etcd's v2error package).
const (
	v2KeyNotFound  = 100
	v2TestFailed   = 101
	v2NotFile      = 102
	v2NodeExist    = 105
	v2PrevValueReq = 201
	v2IndexNaN     = 203
	v2InvalidField = 209
	v2InvalidForm  = 210
	v2RaftInternal = 300
	v2LeaderElect  = 301
	v2EventCleared = 401
)

var v2Messages = map[int]string{
	v2KeyNotFound:  "Key not found",
	v2TestFailed:   "Compare failed",
	v2NotFile:      "Not a file",
	v2NodeExist:    "Key already exists",
	v2PrevValueReq: "PrevValue is Required in POST form",
	v2IndexNaN:     "The given index in POST form is not a number",
	v2InvalidField: "Invalid field",
	v2InvalidForm:  "Invalid POST form",
	v2RaftInternal: "Raft Internal Error",
	v2LeaderElect:  "During Leader Election",
	v2EventCleared: "The event in requested index is outdated and cleared",
}

// v2Error is etcd's v2 error body.
type v2Error struct {
	ErrorCode int    `json:"errorCode"`
	Message   string `json:"message"`
	Cause     string `json:"cause,omitempty"`
	Index     int64  `json:"index"`
}

// v2Status is the HTTP status etcd gives each error code.
func v2Status(code int) int {
	switch code {
	case v2KeyNotFound:
		return http.StatusNotFound
	case v2TestFailed, v2NodeExist:
		return http.StatusPreconditionFailed
	case v2NotFile, 108:
		return http.StatusForbidden
	case v2RaftInternal, v2LeaderElect:
		return http.StatusInternalServerError
	}
	return http.StatusBadRequest
}

// v2Node is a key in etcd's v2 JSON.
type v2Node struct {
	Key           string  `json:"key"`
	Value         *string `json:"value,omitempty"`
	ModifiedIndex int64   `json:"modifiedIndex,omitempty"`
	CreatedIndex  int64   `json:"createdIndex,omitempty"`
}

// v2Event is etcd's v2 response body.
type v2Event struct {
	Action   string  `json:"action"`
	Node     *v2Node `json:"node"`
	PrevNode *v2Node `json:"prevNode,omitempty"`
}

// nodeOf is kv as a v2 node; key is kv's key (the request's), as a
// string already.
func nodeOf(key string, kv *mvccpb.KeyValue, withValue bool) *v2Node {
	// The node and its value in one allocation.
	nv := &struct {
		node  v2Node
		value string
	}{node: v2Node{Key: key, ModifiedIndex: kv.ModRevision, CreatedIndex: kv.CreateRevision}}
	if withValue {
		nv.value = string(kv.Value)
		nv.node.Value = &nv.value
	}
	return &nv.node
}

// v2Keys serves /v2/keys/<key>.
func (s *Server) v2Keys(w http.ResponseWriter, r *http.Request) {
	key, ok := v2Key(r.URL.Path)
	if !ok {
		s.v2Fail(w, v2NotFile, "/", "the root directory; Strata's v2 API serves single keys")
		return
	}
	if s.auth.Enabled() {
		// The v2 keys serve the v3 keys, which v3 auth protects; v2
		// requests carry no v3 token, so none is allowed (etcd's v2
		// answer to a request its own v2 auth refuses).
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"message":"Insufficient credentials"}` + "\n"))
		return
	}
	if r.Method == http.MethodPut || r.Method == http.MethodPost || r.Method == http.MethodDelete {
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Server.MaxRequestBytes)
	}
	if err := r.ParseForm(); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.v2Fail(w, v2InvalidForm, key, fmt.Sprintf("request body over server.max_request_bytes = %d", s.cfg.Server.MaxRequestBytes))
			return
		}
		s.v2Fail(w, v2InvalidForm, key, err.Error())
		return
	}
	for _, f := range []string{"dir", "ttl", "wait", "recursive", "refresh", "sorted", "waitIndex", "stream"} {
		if v := r.Form.Get(f); v != "" && v != "false" {
			s.v2Fail(w, v2InvalidField, key, fmt.Sprintf("%s=%s: not supported (Strata's v2 API serves single keys without TTLs or watches)", f, v))
			return
		}
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.v2Get(w, r, key)
	case http.MethodPut:
		s.v2Put(w, r, key)
	case http.MethodDelete:
		s.v2Delete(w, r, key)
	case http.MethodPost:
		s.v2Fail(w, v2InvalidField, key, "POST (in-order keys) is not supported")
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
	}
}

// v2Key returns the cleaned key of a /v2/keys path; false for the root.
func v2Key(p string) (string, bool) {
	k := strings.TrimPrefix(p, v2KeysPrefix)
	if !strings.HasPrefix(k, "/") {
		k = "/" + k
	}
	// Clean returns a clean path as it is, without a copy.
	k = path.Clean(k)
	return k, k != "/"
}

func (s *Server) v2Get(w http.ResponseWriter, r *http.Request, key string) {
	// As etcd: a GET reads the local store unless quorum=true asks for
	// a linearizable read.
	quorum, err := v2Bool(r, "quorum")
	if err != nil {
		s.v2Fail(w, v2InvalidField, key, err.Error())
		return
	}
	resp, err := s.rangeKV(r.Context(), &pb.RangeRequest{Key: []byte(key), Serializable: !quorum})
	if err != nil {
		s.v2FailErr(w, key, err)
		return
	}
	if len(resp.Kvs) == 0 {
		s.v2FailAt(w, v2KeyNotFound, key, "", resp.Header.Revision)
		return
	}
	s.v2Write(w, http.StatusOK, resp.Header.Revision, &v2Event{Action: "get", Node: nodeOf(key, resp.Kvs[0], true)})
}

// v2Put dispatches as etcd's v2 apply: prevExist=false creates,
// prevExist=true updates, prevValue/prevIndex compare-and-swap,
// otherwise set.
func (s *Server) v2Put(w http.ResponseWriter, r *http.Request, key string) {
	value := r.Form.Get("value")
	if err := s.checkValueSize(len(value)); err != nil {
		s.v2Fail(w, v2InvalidField, key, err.Error())
		return
	}
	c, err := v2Conditions(r)
	if err != nil {
		s.v2Fail(w, err.code, key, err.cause)
		return
	}
	bkey := []byte(key)
	cmd := newPutCommand(bkey, []byte(value))
	if err := s.checkSpace(putCost(&cmd.put)); err != nil {
		s.v2FailErr(w, key, err)
		return
	}
	txn := &cmd.txn
	action := "set"
	switch {
	case c.existSet && !c.exist:
		action = "create"
		txn.Compare = []*pb.Compare{{Key: bkey, Target: pb.Compare_VERSION, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Version{Version: 0}}}
	case c.existSet && c.exist && !c.cas():
		action = "update"
		txn.Compare = []*pb.Compare{{Key: bkey, Target: pb.Compare_VERSION, Result: pb.Compare_GREATER, TargetUnion: &pb.Compare_Version{Version: 0}}}
	case c.cas():
		action = "compareAndSwap"
		txn.Compare = c.compares(bkey)
	}
	if action != "set" {
		// A failed condition is explained from the key as it is.
		txn.Failure = []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: bkey}}}}
	}
	res, perr := s.propose(r.Context(), &cmd.irr)
	if perr != nil {
		s.v2FailErr(w, key, perr)
		return
	}
	tr := res.(*pb.TxnResponse)
	if !tr.Succeeded {
		s.v2CompareFailed(w, key, action, c, tr)
		return
	}
	put := tr.Responses[0].GetResponsePut()
	ev := &v2Event{Action: action, Node: &v2Node{Key: key, Value: &value, ModifiedIndex: tr.Header.Revision}}
	status := http.StatusOK
	if put.PrevKv != nil {
		// The key keeps its create_revision, as a later GET shows it
		// (etcd's v2 set would give a new createdIndex; docs/server.md).
		ev.PrevNode = nodeOf(key, put.PrevKv, true)
		ev.Node.CreatedIndex = put.PrevKv.CreateRevision
	} else {
		ev.Node.CreatedIndex = tr.Header.Revision
		status = http.StatusCreated
	}
	s.v2Write(w, status, tr.Header.Revision, ev)
}

// putCommand is a v2 PUT's command: a txn whose success branch puts the
// key with prev_kv (the compares and the failure branch are added for a
// conditional PUT), its messages in one allocation instead of six.
type putCommand struct {
	irr     pb.InternalRaftRequest
	txn     pb.TxnRequest
	success [1]*pb.RequestOp
	op      pb.RequestOp
	oneof   pb.RequestOp_RequestPut
	put     pb.PutRequest
}

func newPutCommand(key, value []byte) *putCommand {
	c := &putCommand{}
	c.put.Key, c.put.Value, c.put.PrevKv = key, value, true
	c.oneof.RequestPut = &c.put
	c.op.Request = &c.oneof
	c.success[0] = &c.op
	c.txn.Success = c.success[:]
	c.irr.Txn = &c.txn
	return c
}

func (s *Server) v2Delete(w http.ResponseWriter, r *http.Request, key string) {
	c, cerr := v2Conditions(r)
	if cerr != nil {
		s.v2Fail(w, cerr.code, key, cerr.cause)
		return
	}
	if c.existSet {
		s.v2Fail(w, v2InvalidField, key, "prevExist is not valid on DELETE")
		return
	}
	bkey := []byte(key)
	txn := &pb.TxnRequest{
		Compare: append([]*pb.Compare{{Key: bkey, Target: pb.Compare_VERSION, Result: pb.Compare_GREATER, TargetUnion: &pb.Compare_Version{Version: 0}}}, c.compares(bkey)...),
		Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: bkey, PrevKv: true}}}},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: bkey}}}},
	}
	action := "delete"
	if c.cas() {
		action = "compareAndDelete"
	}
	res, err := s.propose(r.Context(), &pb.InternalRaftRequest{Txn: txn})
	if err != nil {
		s.v2FailErr(w, key, err)
		return
	}
	tr := res.(*pb.TxnResponse)
	if !tr.Succeeded {
		s.v2CompareFailed(w, key, action, c, tr)
		return
	}
	prev := tr.Responses[0].GetResponseDeleteRange().PrevKvs[0]
	ev := &v2Event{Action: action,
		Node:     &v2Node{Key: key, ModifiedIndex: tr.Header.Revision, CreatedIndex: prev.CreateRevision},
		PrevNode: nodeOf(key, prev, true)}
	s.v2Write(w, http.StatusOK, tr.Header.Revision, ev)
}

// v2CompareFailed explains a failed conditional write from the failure
// branch's read of the key: missing (100), present (105), or a
// mismatch (101, cause "[want != have]").
func (s *Server) v2CompareFailed(w http.ResponseWriter, key, action string, c v2Cond, tr *pb.TxnResponse) {
	rev := tr.Header.Revision
	kvs := tr.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		s.v2FailAt(w, v2KeyNotFound, key, "", rev)
		return
	}
	if action == "create" {
		s.v2FailAt(w, v2NodeExist, key, "", rev)
		return
	}
	cur := kvs[0]
	var cause string
	switch {
	case c.prevValue != nil && c.prevIndex != 0:
		cause = fmt.Sprintf("[%v != %v] [%v != %v]", *c.prevValue, string(cur.Value), c.prevIndex, cur.ModRevision)
	case c.prevValue != nil:
		cause = fmt.Sprintf("[%v != %v]", *c.prevValue, string(cur.Value))
	default:
		cause = fmt.Sprintf("[%v != %v]", c.prevIndex, cur.ModRevision)
	}
	s.v2FailAt(w, v2TestFailed, cause, "", rev)
}

// v2Cond holds the conditions of a v2 write.
type v2Cond struct {
	exist, existSet bool
	prevValue       *string
	prevIndex       int64
}

func (c v2Cond) cas() bool { return c.prevValue != nil || c.prevIndex != 0 }

func (c v2Cond) compares(key []byte) []*pb.Compare {
	var cs []*pb.Compare
	if c.prevValue != nil {
		cs = append(cs, &pb.Compare{Key: key, Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: []byte(*c.prevValue)}})
	}
	if c.prevIndex != 0 {
		cs = append(cs, &pb.Compare{Key: key, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: c.prevIndex}})
	}
	return cs
}

// v2FormError is a v2 error code with its cause.
type v2FormError struct {
	code  int
	cause string
}

func v2Conditions(r *http.Request) (v2Cond, *v2FormError) {
	var c v2Cond
	if vs, ok := r.Form["prevExist"]; ok && len(vs) > 0 {
		b, err := strconv.ParseBool(vs[0])
		if err != nil {
			return c, &v2FormError{v2InvalidField, fmt.Sprintf("invalid value for prevExist: %q", vs[0])}
		}
		c.exist, c.existSet = b, true
	}
	if vs, ok := r.Form["prevValue"]; ok && len(vs) > 0 {
		if vs[0] == "" {
			return c, &v2FormError{v2PrevValueReq, "prevValue is empty"}
		}
		c.prevValue = &vs[0]
	}
	if v := r.Form.Get("prevIndex"); v != "" {
		n, err := strconv.ParseUint(v, 10, 63)
		if err != nil {
			return c, &v2FormError{v2IndexNaN, fmt.Sprintf("invalid value for prevIndex: %q", v)}
		}
		c.prevIndex = int64(n)
	}
	return c, nil
}

func v2Bool(r *http.Request, name string) (bool, error) {
	v := r.Form.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("invalid value for %s: %q", name, v)
	}
	return b, nil
}

// v2Write sends a successful v2 response with etcd's headers.
func (s *Server) v2Write(w http.ResponseWriter, status int, index int64, ev *v2Event) {
	bp := v2Bodies.Get().(*[]byte)
	body := append(ev.appendJSON((*bp)[:0]), '\n')
	s.setV2Headers(w.Header(), s.node.Status(), index, true)
	w.WriteHeader(status)
	// Write does not keep body (io.Writer's contract): net/http copies
	// it into the connection's buffer.
	_, _ = w.Write(body)
	if cap(body) <= maxPooledV2Body {
		*bp = body
		v2Bodies.Put(bp)
	}
}

// v2Bodies recycles the buffers of v2 answers' JSON (two values and
// their keys: about 0.8 KB for 256-byte values), which were the largest
// allocation of a v2 write.
var v2Bodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledV2Body is the largest buffer v2Bodies keeps: an answer with
// larger values allocates its own, so a few big values do not pin
// megabytes in the pool.
const maxPooledV2Body = 64 << 10

// jsonContentType is the Content-Type of every v2 answer, one slice
// shared by all: net/http only reads a header's values, and one added to
// it would copy the slice (its capacity is its length).
var jsonContentType = []string{"application/json"}

// setV2Headers sets etcd's v2 headers: Content-Type, X-Etcd-Cluster-Id
// and X-Etcd-Index, and with raft X-Raft-Index and X-Raft-Term (a
// successful answer's). The values share one slice and the two indexes
// one string: two allocations where http.Header.Set makes eight.
func (s *Server) setV2Headers(h http.Header, st cluster.Status, index int64, raft bool) {
	var buf [40]byte
	b := strconv.AppendInt(buf[:0], index, 10)
	n := len(b)
	if raft {
		b = strconv.AppendUint(b, st.CommitIndex, 10)
	}
	nums := string(b)
	vals := make([]string, 0, 4)
	set := func(key, v string) {
		vals = append(vals, v)
		h[key] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	h["Content-Type"] = jsonContentType
	set("X-Etcd-Cluster-Id", s.clusterIDHex(st.ClusterID))
	set("X-Etcd-Index", nums[:n])
	if raft {
		set("X-Raft-Index", nums[n:])
		set("X-Raft-Term", strconv.FormatUint(st.Term, 10))
	}
}

// clusterIDHex is id in hexadecimal, as etcd's X-Etcd-Cluster-Id, kept
// for the next answer: a member's cluster ID does not change once known.
func (s *Server) clusterIDHex(id uint64) string {
	if c := s.clusterHex.Load(); c != nil && c.id == id {
		return c.hex
	}
	c := &idHex{id: id, hex: strconv.FormatUint(id, 16)}
	s.clusterHex.Store(c)
	return c.hex
}

// idHex is an ID with its hexadecimal form.
type idHex struct {
	id  uint64
	hex string
}

// v2Fail sends a v2 error at the current index.
func (s *Server) v2Fail(w http.ResponseWriter, code int, cause, detail string) {
	s.v2FailAt(w, code, cause, detail, s.store.Rev())
}

// v2FailAt sends a v2 error: etcd's body, with only X-Etcd-Index and the
// cluster ID as headers. detail, if set, is appended to the cause.
func (s *Server) v2FailAt(w http.ResponseWriter, code int, cause, detail string, index int64) {
	if detail != "" {
		cause += ": " + detail
	}
	body, _ := json.Marshal(v2Error{ErrorCode: code, Message: v2Messages[code], Cause: cause, Index: index})
	s.setV2Headers(w.Header(), s.node.Status(), index, false)
	w.WriteHeader(v2Status(code))
	_, _ = w.Write(append(body, '\n'))
}

// v2FailErr maps an error of the store or the apply path to a v2 error.
func (s *Server) v2FailErr(w http.ResponseWriter, key string, err error) {
	code := v2RaftInternal
	switch {
	case errors.Is(err, errValueTooLarge), errors.Is(err, errRequestTooLarge), errors.Is(err, errInvalid):
		code = v2InvalidField
	default:
		if st := toGRPC(err); st != nil && strings.Contains(st.Error(), "no leader") {
			code = v2LeaderElect
		}
	}
	s.v2Fail(w, code, key, err.Error())
}

// v2Member is a member in etcd's v2 members JSON.
type v2Member struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// v2Members serves /v2/members, which etcd's v2 clients read first, and
// /v2/members/leader.
func (s *Server) v2Members(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	st := s.node.Status()
	members := []v2Member{}
	var leader *v2Member
	for _, m := range s.node.Members() {
		members = append(members, v2Member{ID: strconv.FormatUint(m.ID, 16), Name: m.Name,
			PeerURLs: nonNil(m.PeerURLs), ClientURLs: nonNil(m.ClientURLs)})
		if m.ID == st.Leader {
			leader = &members[len(members)-1]
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Etcd-Cluster-Id", strconv.FormatUint(st.ClusterID, 16))
	switch r.URL.Path {
	case "/v2/members", "/v2/members/":
		_ = json.NewEncoder(w).Encode(struct {
			Members []v2Member `json:"members"`
		}{members})
	case "/v2/members/leader":
		if leader == nil {
			http.Error(w, `{"message":"During Leader Election"}`, http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(leader)
	default:
		http.Error(w, `{"message":"Not found"}`, http.StatusNotFound)
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
