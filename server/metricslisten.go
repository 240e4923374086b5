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

// metricsListener is one of server.listen_metrics_urls.
type metricsListener struct {
	ln  net.Listener
	srv *http.Server
	tls bool
}

// listenMetrics opens every metrics URL, so that an address in use fails
// Start before anything is served. Serving starts with serveMetrics.
func (s *Server) listenMetrics() error {
	for _, raw := range s.cfg.Server.ListenMetricsURLs {
		mu, err := config.ParseListenURL(raw)
		if err != nil { // Validate checked it
			return fmt.Errorf("server: listen_metrics_urls = %q: %w", raw, err)
		}
		ln, err := net.Listen("tcp", mu.Addr)
		if err != nil {
			return fmt.Errorf("server: listen_metrics_urls = %q: %w", raw, err)
		}
		s.metricsLns = append(s.metricsLns, &metricsListener{ln: ln, tls: mu.TLS})
	}
	return nil
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

// metricsURL is ml's URL with the port it got.
func (s *Server) metricsURL(ml *metricsListener) string {
	scheme := "http"
	if ml.tls {
		scheme = "https"
	}
	return scheme + "://" + ml.ln.Addr().String()
}

// MetricsURLs returns the URLs of server.listen_metrics_urls, in their
// order, with the ports chosen where the configuration said port 0.
func (s *Server) MetricsURLs() []string {
	urls := make([]string, len(s.metricsLns))
	for i, ml := range s.metricsLns {
		urls[i] = s.metricsURL(ml)
	}
	return urls
}

// closeMetrics stops the metrics listeners: gracefully within ctx, then
// by closing their connections. Listeners not served yet are closed.
func (s *Server) closeMetrics(ctx context.Context) {
	for _, ml := range s.metricsLns {
		if ml.srv == nil {
			_ = ml.ln.Close()
			continue
		}
		if err := ml.srv.Shutdown(ctx); err != nil {
			_ = ml.srv.Close()
		}
	}
}
