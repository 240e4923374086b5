// Command strata administers a Strata database, in the spirit of RocksDB's
// ldb: put, get, delete, scan, load (JSON Lines), flush, compact,
// checkpoint, stats and options. Run "strata help" for the commands and
// their examples; the commands live in package internal/admin.
//
// Installed or linked under the name etcd, it is `strata etcd`: a
// manifest, unit or script that runs `etcd --flags...` runs Strata with
// etcd's flags unchanged (the image's /usr/local/bin/etcd is a link to
// strata; see docs/etcd-flags.md).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratadb/strata/internal/admin"
	"github.com/stratadb/strata/internal/cmalloc"
)

func main() {
	// Pebble's memtables are C blocks; with huge pages each costs a page
	// fault per 2 MiB instead of per 4 KiB (docs/config.md, "Huge pages
	// for memtables").
	if _, err := cmalloc.ExecWithHugePages(); err != nil {
		fmt.Fprintln(os.Stderr, "strata: starting with huge pages for C blocks:", err)
	}
	root := admin.NewRootCommand()
	if filepath.Base(os.Args[0]) == "etcd" {
		root.SetArgs(append([]string{"etcd"}, os.Args[1:]...))
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "strata:", err)
		os.Exit(1)
	}
}
