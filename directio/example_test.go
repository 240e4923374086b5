package directio_test

import (
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stratadb/strata/directio"
)

// Example opens Pebble with direct table reads and writes, falling back to
// buffered I/O where the filesystem refuses O_DIRECT.
func Example() {
	dir, err := os.MkdirTemp("", "directio-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	fs := directio.NewFS(vfs.Default, directio.Options{Reads: true, Writes: true, Fallback: true})
	if err := fs.Probe(dir); err != nil { // at open, for every table directory
		fmt.Println(err)
		return
	}
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: quiet{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = db.Set([]byte("hello"), []byte("world"), pebble.Sync)
	_ = db.Flush() // writes a table file
	v, closer, err := db.Get([]byte("hello"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("hello = %s\n", v)
	_ = closer.Close()
	_ = db.Close()

	st := fs.Stats()
	fmt.Println("direct or fallen back:", st.DirectWrites > 0 || len(st.FallbackPaths) > 0)
	// Output:
	// hello = world
	// direct or fallen back: true
}

type quiet struct{}

func (quiet) Infof(string, ...interface{})  {}
func (quiet) Errorf(string, ...interface{}) {}
func (quiet) Fatalf(f string, a ...interface{}) {
	panic(fmt.Sprintf(f, a...))
}
