package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratadb/strata/config"
)

// The metrics listeners (server.listen_metrics_urls, etcd's
// --listen-metrics-urls): as etcd's embed.serveMetrics, one HTTP server
// per URL serving exactly /metrics, /health, /livez and /readyz (with
// their /livez/NAME and /readyz/NAME checks), the handlers of the client
// URL, so that a probe or a scraper sees the same answers on either. An
// https URL uses the client URL's certificate and, with client_ca_file,
// verifies client certificates, as etcd's uses its client TLS
// (createMetricsListener). Nothing else is served there: no v2 or v3
// API, no /version.

// extraListener is one of server.listen_metrics_urls or
// listen_client_urls: its listener, opened at Start so that an address in
// use fails Start before anything is served, and the server on it.
type extraListener struct {
	ln  net.Listener
	srv *http.Server
	tls bool
}

// openListeners opens the URLs of the [server] key named key.
func openListeners(key string, raws []string) ([]*extraListener, error) {
	var out []*extraListener
	for _, raw := range raws {
		lu, err := config.ParseListenURL(raw)
		if err == nil { // else Validate let it through: it did not
			var ln net.Listener
			if ln, err = net.Listen("tcp", lu.Addr); err == nil {
				out = append(out, &extraListener{ln: ln, tls: lu.TLS})
				continue
			}
		}
		closeListeners(context.Background(), out)
		return nil, fmt.Errorf("server: %s = %q: %w", key, raw, err)
	}
	return out, nil
}

// url is the listener's URL with the port it got.
func (l *extraListener) url() string {
	scheme := "http"
	if l.tls {
		scheme = "https"
	}
	return scheme + "://" + l.ln.Addr().String()
}

// listenerURLs returns the URLs of ls, in their order, with the ports
// chosen where the configuration said port 0.
func listenerURLs(ls []*extraListener) []string {
	urls := make([]string, len(ls))
	for i, l := range ls {
		urls[i] = l.url()
	}
	return urls
}

// closeListeners stops ls: gracefully within ctx, then by closing their
// connections. Listeners not served yet are closed.
func closeListeners(ctx context.Context, ls []*extraListener) {
	for _, l := range ls {
		if l.srv == nil {
			_ = l.ln.Close()
			continue
		}
		if err := l.srv.Shutdown(ctx); err != nil {
			_ = l.srv.Close()
		}
	}
}

// probeHandlers installs on mux what the client URL and the metrics URLs
// both serve: /health, /livez and /readyz (probes.go) and /metrics.
func (s *Server) probeHandlers(mux *http.ServeMux) {
	mux.Handle("/health", s.metrics.http("health", http.HandlerFunc(s.health)))
	for _, reg := range []*probeRegistry{s.livez(), s.readyz()} {
		reg.install(mux, s.metrics)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics.registry, promhttp.HandlerOpts{}))
}

// serveMetrics serves the metrics listeners listenMetrics opened.
func (s *Server) serveMetrics() error {
	if len(s.metricsLns) == 0 {
		return nil
	}
	mux := http.NewServeMux()
	s.probeHandlers(mux)
	sc := s.cfg.Server
	for _, ml := range s.metricsLns {
		ml.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 1 << 20}
		if ml.tls {
			cfg, err := serverTLS(sc.CertFile, sc.KeyFile, sc.ClientCAFile)
			if err != nil {
				return err
			}
			ml.srv.TLSConfig = cfg
			s.goServe(func() error { return ml.srv.ServeTLS(ml.ln, "", "") })
		} else {
			s.goServe(func() error { return ml.srv.Serve(ml.ln) })
		}
	}
	return nil
}

// MetricsURLs returns the URLs of server.listen_metrics_urls, in their
// order, with the ports chosen where the configuration said port 0.
func (s *Server) MetricsURLs() []string { return listenerURLs(s.metricsLns) }
