package engine

import (
	"errors"
	"fmt"

	"github.com/stratadb/strata/config"
)

// ErrCannotDeliver is returned by Open for a setting whose behaviour no
// Pebble-based engine can deliver; the error names the key and what to use
// instead.
var ErrCannotDeliver = errors.New("engine: setting cannot be delivered")

// checkDeliverable rejects settings Strata cannot honour. It runs after
// Validate, so every value is in range.
func checkDeliverable(cfg *config.Config) error {
	if cfg.UseUniversalCompaction {
		return fmt.Errorf("%w: use_universal_compaction = true: Pebble has only leveled compaction; set use_universal_compaction = false (leveled, with dynamic level sizes)", ErrCannotDeliver)
	}
	return nil
}
