package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// etcd37Package is the import path of the etcd 3.7 program.
const etcd37Package = "github.com/stratadb/strata/internal/bench/etcd37"

// ErrMissingProgram is returned when a program the benchmark needs is not
// installed.
var ErrMissingProgram = errors.New("bench: missing program")

// LookPath finds program name (a path or a name on $PATH) and says how to
// install it when it is missing.
func LookPath(name, install string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: %s not found (%v); %s", ErrMissingProgram, name, err, install)
	}
	return p, nil
}

// floorPackage is the import path of the transport floor program.
const floorPackage = "github.com/stratadb/strata/internal/bench/floor"

// BuildEtcd37 builds the etcd 3.7 program (internal/bench/etcd37) into dir
// with the go command, which must run inside Strata's module: from its
// checkout, or pass a binary built there instead.
func BuildEtcd37(ctx context.Context, dir string) (string, error) {
	return buildProgram(ctx, dir, etcd37Package, "etcd37", "the etcd 3.7 peer")
}

// BuildFloor builds the transport floor (internal/bench/floor) into dir,
// as BuildEtcd37 builds etcd 3.7.
func BuildFloor(ctx context.Context, dir string) (string, error) {
	return buildProgram(ctx, dir, floorPackage, "floor", "the transport floor")
}

// buildProgram builds pkg into dir/name with the go command, from Strata's
// checkout; --name PATH passes a binary built there instead.
func buildProgram(ctx context.Context, dir, pkg, name, what string) (string, error) {
	dirName := strings.TrimPrefix(pkg, "github.com/stratadb/strata/")
	goCmd, err := LookPath("go", fmt.Sprintf("%s is built from Strata's source with the go command; or build it once with `go build -o %s ./%s` and pass --%s PATH", what, name, dirName, name))
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, pkg)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("bench: go build %s: %w: %s (run from Strata's checkout, or pass --%s PATH)", pkg, err, strings.TrimSpace(stderr.String()), name)
	}
	return out, nil
}
