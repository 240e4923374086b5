// Package mixin lists the metrics that etcd's own alerts and Grafana
// dashboard (etcd's contrib/mixin) query, and reads a /metrics scrape, so
// that tests can check a running Strata member exports every one of them
// and that each moves with the event it counts.
//
//	s, err := mixin.Get("http://127.0.0.1:2379/metrics")
//	for _, m := range mixin.Metrics() { if !s.Has(m.Series) { ... } }
//	puts := s.Sum("grpc_server_handled_total", "grpc_method", "Put")
package mixin

import (
	_ "embed"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

//go:embed etcd-mixin-metrics.txt
var listing string

// Metric is one series etcd's mixin queries.
type Metric struct {
	// Series is the name queried (a histogram's _bucket series).
	Series string
	// Where is where the mixin queries it: alerts, dashboard or both.
	Where string
	// ClusterOnly is set for the peer metrics, which only a member of a
	// raft cluster exports.
	ClusterOnly bool
}

// Metrics returns the list, in the order of etcd-mixin-metrics.txt.
func Metrics() []Metric {
	var out []Metric
	for _, line := range strings.Split(listing, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		out = append(out, Metric{Series: f[0], Where: f[1], ClusterOnly: f[2] == "cluster"})
	}
	return out
}

// Sample is one sample of a scrape.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Scrape holds a scrape's samples by series name; a histogram's are under
// name_bucket (with le), name_count and name_sum.
type Scrape map[string][]Sample

// Get scrapes url (a /metrics endpoint in Prometheus's text format).
func Get(url string) (Scrape, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	return Parse(resp.Body)
}

// Parse reads a scrape in Prometheus's text format.
func Parse(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	s := Scrape{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					inf = inf || math.IsInf(b.GetUpperBound(), 1)
					bl := map[string]string{"le": formatLE(b.GetUpperBound())}
					for k, v := range labels {
						bl[k] = v
					}
					s[name+"_bucket"] = append(s[name+"_bucket"], Sample{bl, float64(b.GetCumulativeCount())})
				}
				if !inf {
					s[name+"_bucket"] = append(s[name+"_bucket"], Sample{withLE(labels, "+Inf"), float64(h.GetSampleCount())})
				}
				s[name+"_count"] = append(s[name+"_count"], Sample{labels, float64(h.GetSampleCount())})
				s[name+"_sum"] = append(s[name+"_sum"], Sample{labels, h.GetSampleSum()})
			case dto.MetricType_COUNTER:
				s[name] = append(s[name], Sample{labels, m.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				s[name] = append(s[name], Sample{labels, m.GetGauge().GetValue()})
			default:
				s[name] = append(s[name], Sample{labels, m.GetUntyped().GetValue()})
			}
		}
	}
	return s, nil
}

// formatLE writes a bucket bound as Prometheus's text format does.
func formatLE(f float64) string {
	if math.IsInf(f, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func withLE(labels map[string]string, le string) map[string]string {
	out := map[string]string{"le": le}
	for k, v := range labels {
		out[k] = v
	}
	return out
}

// Has reports whether the scrape has a sample of series.
func (s Scrape) Has(series string) bool { return len(s[series]) > 0 }

// Sum adds the samples of series whose labels match the name/value
// pairs given (none: every sample); NaN if there is none.
func (s Scrape) Sum(series string, labelPairs ...string) float64 {
	sum, n := 0.0, 0
	for _, smp := range s[series] {
		ok := true
		for i := 0; i+1 < len(labelPairs); i += 2 {
			if smp.Labels[labelPairs[i]] != labelPairs[i+1] {
				ok = false
			}
		}
		if ok {
			sum += smp.Value
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum
}
