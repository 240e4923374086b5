package engine

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/pebbleconf"
)

// pebbleOptions resolves cfg and converts it as Open does: the options of
// the raw Pebble peers in tests and benchmarks.
func pebbleOptions(cfg *config.Config) (*pebble.Options, error) {
	r, err := cfg.Resolve()
	if err != nil {
		return nil, err
	}
	return pebbleconf.Options(r), nil
}
