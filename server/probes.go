package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/status"
)

// The health endpoints, as etcd 3.7 serves them
// (server/etcdserver/api/etcdhttp/health.go):
//
//   - /health: {"health":"true","reason":""}, or 503 with the first
//     failure of, in order, an alarm raised ("ALARM NOSPACE", "ALARM
//     CORRUPT"; ?exclude=NOSPACE skips that alarm), no leader ("RAFT NO
//     LEADER"; not checked with ?serializable=true) and a range read
//     ("RANGE ERROR:...", serializable with ?serializable=true).
//   - /livez and /readyz (etcd 3.6+, kubeadm's probes): lists of named
//     checks. 200 "ok\n" when all pass (with ?verbose, a "[+]name ok"
//     line per check before it); 503 with a "[+]name ok" or "[-]name
//     failed: reason" line per check otherwise. ?exclude=NAME leaves a
//     check out; /livez/NAME and /readyz/NAME run one.
//     livez: serializable_read. readyz: data_corruption (a CORRUPT
//     alarm), disk_stall (beyond etcd: a disk operation in flight past
//     stallBound, stall.go), serializable_read, linearizable_read,
//     non_learner.
//
// Beyond etcd, whose client listener opens only once the member is
// ready: a member that has not caught up with the cluster since it
// started (ready.go) fails readyz's reads, as a client's reads would
// wait; livez's read is not held, since a member catching up is alive.

// healthBody is /health's answer (etcd's etcdhttp.Health).
type healthBody struct {
	Health string `json:"health"`
	Reason string `json:"reason"`
}

// health answers as etcd 3.7's /health. Like etcd's, the answer is sent
// as text/plain (etcd writes the JSON without setting a type) with no
// newline after it; GET only. etcd 3.4 answered {"health":"true"},
// without the reason: see docs/server-reference.md.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !allowGET(w, r) {
		return
	}
	b := s.healthOf(r.Context(), querySet(r, "exclude"), r.URL.Query().Get("serializable") == "true")
	d, _ := json.Marshal(b)
	if b.Health != "true" {
		s.metrics.healthFailed.Inc()
		http.Error(w, string(d), http.StatusServiceUnavailable)
		return
	}
	s.metrics.healthSuccess.Inc()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(d)
}

// healthOf runs /health's checks in etcd's order: alarms, leader, read.
func (s *Server) healthOf(ctx context.Context, excludedAlarms map[string]bool, serializable bool) healthBody {
	for _, a := range s.apply.alarms.get(pb.AlarmType_NONE) {
		if excludedAlarms[a.Alarm.String()] {
			continue
		}
		switch a.Alarm {
		case pb.AlarmType_NOSPACE:
			return healthBody{Health: "false", Reason: "ALARM NOSPACE"}
		case pb.AlarmType_CORRUPT:
			return healthBody{Health: "false", Reason: "ALARM CORRUPT"}
		}
		return healthBody{Health: "false", Reason: "ALARM UNKNOWN"}
	}
	if !serializable && s.node.Status().Leader == 0 {
		return healthBody{Health: "false", Reason: "RAFT NO LEADER"}
	}
	if err := s.probeRead(ctx, serializable); err != nil {
		return healthBody{Health: "false", Reason: "RANGE ERROR:" + err.Error()}
	}
	return healthBody{Health: "true"}
}

// probeRead is etcd's health read: one key of a range, keys only,
// through the member's read path (a read barrier unless serializable),
// bounded by the request timeout. Its error is etcd's message.
func (s *Server) probeRead(ctx context.Context, serializable bool) error {
	ctx, cancel := withRequestTimeout(ctx)
	defer cancel()
	_, err := s.rangeKV(ctx, &pb.RangeRequest{Key: []byte{0}, RangeEnd: []byte{0}, KeysOnly: true, Limit: 1, Serializable: serializable})
	if err != nil {
		return errors.New(status.Convert(toGRPC(err)).Message())
	}
	return nil
}

// probeCheck is one named check of /livez or /readyz.
type probeCheck struct {
	name  string
	check func(ctx context.Context) error
}

// probeRegistry is /livez's or /readyz's checks, in the order they run
// and are listed (etcd keeps them in a map, so its order varies).
type probeRegistry struct {
	kind   string // "livez" or "readyz"
	checks []probeCheck
}

// livez is etcd's: the member serves a local read.
func (s *Server) livez() *probeRegistry {
	return &probeRegistry{kind: "livez", checks: []probeCheck{
		{"serializable_read", func(ctx context.Context) error { return s.probeRead(ctx, true) }},
	}}
}

// readyz is etcd's: no CORRUPT alarm, a local read and one with the
// cluster's consensus, and not a learner; and no disk stall.
func (s *Server) readyz() *probeRegistry {
	return &probeRegistry{kind: "readyz", checks: []probeCheck{
		{"data_corruption", s.alarmProbe(pb.AlarmType_CORRUPT)},
		{"disk_stall", s.stall.check},
		{"serializable_read", func(ctx context.Context) error { return s.readyRead(ctx, true) }},
		{"linearizable_read", func(ctx context.Context) error { return s.readyRead(ctx, false) }},
		{"non_learner", s.learnerProbe},
	}}
}

// readyRead is readyz's read: refused while the member has not caught up
// (ready.go), and a linearizable one without a leader, as etcd's read
// index fails then.
func (s *Server) readyRead(ctx context.Context, serializable bool) error {
	if !s.caughtUp.ok.Load() {
		return errors.New("etcdserver: member has not caught up with the cluster yet")
	}
	if !serializable && s.node.Status().Leader == 0 {
		return errors.New(rpctypes.ErrorDesc(rpctypes.ErrGRPCNoLeader))
	}
	return s.probeRead(ctx, serializable)
}

func (s *Server) alarmProbe(at pb.AlarmType) func(context.Context) error {
	return func(context.Context) error {
		if len(s.apply.alarms.get(at)) > 0 {
			return fmt.Errorf("alarm activated: %s", at)
		}
		return nil
	}
}

func (s *Server) learnerProbe(context.Context) error {
	id := s.node.Status().MemberID
	for _, m := range s.node.Members() {
		if m.ID == id && m.IsLearner {
			return errors.New("not supported for learner")
		}
	}
	return nil
}

// install serves the registry's root path and one path per check.
func (reg *probeRegistry) install(mux *http.ServeMux, m *metrics) {
	root := "/" + reg.kind
	mux.Handle(root, m.http(reg.kind, reg.handler(m, func(r *http.Request) []probeCheck {
		excluded := querySet(r, "exclude")
		var run []probeCheck
		for _, c := range reg.checks {
			if !excluded[c.name] {
				run = append(run, c)
			}
		}
		return run // excluding an unknown check is no error, as etcd's
	})))
	for _, c := range reg.checks {
		mux.Handle(path.Join(root, c.name), m.http(reg.kind, reg.handler(m, func(*http.Request) []probeCheck { return []probeCheck{c} })))
	}
}

// handler runs the checks pick chooses and answers as etcd's.
func (reg *probeRegistry) handler(m *metrics, pick func(*http.Request) []probeCheck) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowGET(w, r) {
			return
		}
		var out bytes.Buffer
		failed := false
		for _, c := range pick(r) {
			result := "success"
			if err := c.check(r.Context()); err != nil {
				fmt.Fprintf(&out, "[-]%s failed: %v\n", c.name, err)
				failed, result = true, "error"
			} else {
				fmt.Fprintf(&out, "[+]%s ok\n", c.name)
			}
			m.observeCheck(reg.kind, c.name, result)
		}
		if failed {
			// Failures always give the details.
			http.Error(w, out.String(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if _, ok := r.URL.Query()["verbose"]; ok {
			_, _ = w.Write(out.Bytes())
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}

// querySet is the non-empty values of a query parameter given any number
// of times (?exclude=a&exclude=b).
func querySet(r *http.Request, name string) map[string]bool {
	set := map[string]bool{}
	for _, v := range r.URL.Query()[name] {
		if v != "" {
			set[v] = true
		}
	}
	return set
}

// healthMetrics are etcd's health check metrics (etcdhttp's).
type healthMetrics struct {
	healthSuccess, healthFailed prometheus.Counter
	checkResult                 *prometheus.GaugeVec
	checks                      *prometheus.CounterVec
}

func newHealthMetrics() healthMetrics {
	return healthMetrics{
		healthSuccess: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "server", Name: "health_success",
			Help: "The total number of successful health checks"}),
		healthFailed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "server", Name: "health_failures",
			Help: "The total number of failed health checks"}),
		checkResult: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "etcd", Subsystem: "server", Name: "healthcheck",
			Help: "The result of each kind of healthcheck."}, []string{"type", "name"}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "etcd", Subsystem: "server", Name: "healthchecks_total",
			Help: "The total number of each kind of healthcheck."}, []string{"type", "name", "status"}),
	}
}

func (h healthMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.healthSuccess, h.healthFailed, h.checkResult, h.checks}
}

// observeCheck records one probe check's result ("success" or "error").
func (h healthMetrics) observeCheck(kind, name, result string) {
	v := 0.0
	if result == "success" {
		v = 1
	}
	h.checkResult.WithLabelValues(kind, name).Set(v)
	h.checks.WithLabelValues(kind, name, result).Inc()
}
