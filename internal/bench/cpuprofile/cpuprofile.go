// Package cpuprofile starts a CPU profile of a whole benchmark server's run
// when STRATA_CPUPROFILE names a file: profserve (`strata serve`), the
// transport floor and etcd37 read the same variable, so that one command
// profiles whichever servers `strata bench` starts:
//
//	STRATA_CPUPROFILE=/tmp/kube-%p.prof strata bench kube --strata /tmp/strata-prof --servers strata,etcd37,floor
//
// A %p in the file name becomes the process ID, so that a benchmark that
// starts servers more than once (passes, a restart) keeps every profile.
package cpuprofile

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// Env names the environment variable that holds the profile's file name.
const Env = "STRATA_CPUPROFILE"

// Start starts the profile if Env is set; stop ends it and closes the
// file, and must be called before the process exits. Without Env, stop
// does nothing.
func Start() (stop func(), err error) {
	path := os.Getenv(Env)
	if path == "" {
		return func() {}, nil
	}
	path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", Env, path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s=%q: %w", Env, path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
