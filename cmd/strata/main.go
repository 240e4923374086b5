// Command strata administers a Strata database, in the spirit of RocksDB's
// ldb: put, get, delete, scan, load (JSON Lines), flush, compact,
// checkpoint, stats and options. Run "strata help" for the commands and
// their examples; the commands live in package internal/admin.
package main

import (
	"fmt"
	"os"

	"github.com/stratadb/strata/internal/admin"
)

func main() {
	if err := admin.NewRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}
