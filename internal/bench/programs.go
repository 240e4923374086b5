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

// BuildEtcd37 builds the etcd 3.7 program (internal/bench/etcd37) into dir
// with the go command, which must run inside Strata's module: from its
// checkout, or pass a binary built there instead.
func BuildEtcd37(ctx context.Context, dir string) (string, error) {
	goCmd, err := LookPath("go", "the etcd 3.7 peer is built from Strata's source with the go command; or build it once with `go build -o etcd37 ./internal/bench/etcd37` and pass --etcd37 PATH")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "etcd37")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-o", out, etcd37Package)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("bench: go build %s: %w: %s (run from Strata's checkout, or pass --etcd37 PATH)", etcd37Package, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
