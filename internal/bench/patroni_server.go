package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// StartEtcdFlags starts server kind as a single-member cluster from etcd's
// command line: `etcd FLAGS` for etcd 3.4 and `strata etcd FLAGS` for
// Strata, with the same flags (its name, data dir, client and peer URLs on
// free loopback ports, then extra), in a new data directory under parent,
// and returns once it answers /health. It is how an etcd user runs either:
// the flags a unit file or a manifest passes, not a Strata config file.
func StartEtcdFlags(ctx context.Context, kind Kind, p Programs, parent string, pin Pinning, extra ...string) (*Server, error) {
	dir, err := os.MkdirTemp(parent, string(kind)+"-")
	if err != nil {
		return nil, fmt.Errorf("bench: %s: data directory: %w", kind, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Kind: kind, Endpoint: fmt.Sprintf("127.0.0.1:%d", ports[0]), Member: "m1", dir: dir, logPath: filepath.Join(dir, "server.log")}
	s.URL = "http://" + s.Endpoint
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	flags := append([]string{
		"--name=m1", "--data-dir=" + filepath.Join(dir, "data"),
		"--listen-client-urls=" + s.URL, "--advertise-client-urls=" + s.URL,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=m1=" + peer,
	}, extra...)
	var env []string
	switch kind {
	case KindStrata:
		if p.Strata == "" {
			return nil, s.fail(errors.New("no strata executable given"))
		}
		s.cmd = pin.Command(pin.ServerCPUs, p.Strata, append([]string{"etcd"}, flags...)...)
		env = p.StrataEnv
	case KindEtcd34:
		if p.Etcd == "" {
			return nil, s.fail(errors.New("no etcd executable given"))
		}
		s.cmd = pin.Command(pin.ServerCPUs, p.Etcd, flags...)
	default:
		return nil, s.fail(fmt.Errorf("%w %q: etcd's command line runs strata and etcd34", ErrUnknownServer, kind))
	}
	if err := s.start(env); err != nil {
		return nil, s.fail(err)
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}
