// Package examples holds runnable programs and configuration files; this
// test keeps the configuration files loadable.
package examples

import (
	"testing"

	"github.com/stratadb/strata/config"
)

func TestSeedConfigLoads(t *testing.T) {
	cfg, err := config.Load("strata.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.DBPaths) != 2 || cfg.MemtableSizeMB != 512 || cfg.BlockCacheSizeMB != 4096 ||
		cfg.TargetFileSizeBaseMB != 128 || !cfg.UseDirectIOForFlushAndCompaction || cfg.CompressionBottommost != "zstd" {
		t.Errorf("examples/strata.toml loaded as %+v", cfg)
	}
}
