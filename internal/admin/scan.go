package admin

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/mvcc"
)

// scanOptions are the options of scan.
type scanOptions struct {
	global *globalOptions
	prefix string
	from   string
	to     string
	limit  int
}

// AddFlags registers scan's flags.
func (o *scanOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.prefix, "prefix", "", "print only keys starting with `P`")
	fs.StringVar(&o.from, "from", "", "start at key `K` (inclusive)")
	fs.StringVar(&o.to, "to", "", "stop before key `K` (exclusive)")
	fs.IntVar(&o.limit, "limit", 0, "print at most `N` pairs (0: no limit)")
}

// Validate checks the flags.
func (o *scanOptions) Validate(*cobra.Command, []string) error {
	var problems []error
	if o.limit < 0 {
		problems = append(problems, fmt.Errorf("--limit %d: must be >= 0", o.limit))
	}
	if o.from != "" && o.to != "" && o.from >= o.to {
		problems = append(problems, fmt.Errorf("--from %q --to %q: --from must sort before --to", o.from, o.to))
	}
	return errors.Join(problems...)
}

// bounds returns the iterator bounds of the flags: the intersection of
// [from, to) with the keys starting with prefix. A nil bound is open. empty
// reports an intersection that holds no key at all.
func (o *scanOptions) bounds() (lower, upper []byte, empty bool) {
	if o.from != "" {
		lower = []byte(o.from)
	}
	if o.to != "" {
		upper = []byte(o.to)
	}
	if o.prefix != "" {
		p := []byte(o.prefix)
		if lower == nil || bytes.Compare(p, lower) > 0 {
			lower = p
		}
		if end := prefixEnd(p); end != nil && (upper == nil || bytes.Compare(end, upper) < 0) {
			upper = end
		}
	}
	if lower != nil && upper != nil && bytes.Compare(lower, upper) >= 0 {
		return nil, nil, true
	}
	return lower, upper, false
}

// prefixEnd returns the smallest key greater than every key that starts with
// prefix: prefix with its last byte incremented, after dropping trailing 0xff
// bytes ("a\xff" -> "b"). It returns nil, no upper bound, when prefix is
// empty or all 0xff.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func newScanCommand(g *globalOptions) *cobra.Command {
	o := &scanOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "scan",
		Short: "Print key-value pairs in key order",
		Long: `scan prints one "KEY<TAB>VALUE" line per pair, in key order, within the
range the flags select. Keys and values are printed as raw bytes.`,
		Example: `  strata --db ./data scan
  strata --db ./data scan --prefix entity: --limit 10
  strata --db ./data scan --from entity:00000100 --to entity:00000200`,
		Args: cli.Args(),
	}, o.AddFlags, o.Validate, o.run)
}

// run opens the database read-only and prints the selected pairs.
func (o *scanOptions) run(cmd *cobra.Command, _ []string) (err error) {
	db, err := o.global.open(o.global.logger(cmd), readOnly)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	w := bufio.NewWriter(cmd.OutOrStdout())
	rev, server, err := mvcc.StoreRevision(db)
	if err != nil {
		return err
	}
	if server {
		fmt.Fprintf(cmd.ErrOrStderr(), "strata: %s holds a `strata serve` store (revision %d): printing each key's value at the latest revision, as the server would serve it; with the server running, use etcdctl get\n", db.Config().DBPath, rev)
		_, err = o.printServer(db, w)
		return err
	}
	_, err = o.print(db, w)
	return err
}

// printServer writes the selected keys of a server store at its latest
// revision, "KEY<TAB>VALUE" as print does, and returns their number.
func (o *scanOptions) printServer(db *engine.DB, w *bufio.Writer) (int, error) {
	lower, upper, empty := o.bounds()
	if empty {
		return 0, nil
	}
	st, err := mvcc.Open(db, mvcc.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	// etcd's range conventions: key "\x00" with end "\x00" is every key,
	// end "\x00" every key from key on.
	key, end := lower, upper
	if key == nil {
		key = []byte{0}
	}
	if end == nil {
		end = []byte{0}
	}
	res, err := st.Range(key, end, mvcc.RangeOptions{Limit: int64(o.limit)})
	if err != nil {
		return 0, err
	}
	for _, kv := range res.KVs {
		_, _ = w.Write(kv.Key)
		_ = w.WriteByte('\t')
		_, _ = w.Write(kv.Value)
		_ = w.WriteByte('\n')
	}
	return len(res.KVs), w.Flush()
}

// print writes the selected pairs to w, flushes it and returns their number.
func (o *scanOptions) print(db *engine.DB, w *bufio.Writer) (n int, err error) {
	lower, upper, empty := o.bounds()
	if empty {
		return 0, nil
	}
	it, err := db.NewIter(&engine.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, err
	}
	for ok := it.First(); ok && (o.limit == 0 || n < o.limit); ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return n, err
		}
		_, _ = w.Write(it.Key())
		_ = w.WriteByte('\t')
		_, _ = w.Write(v)
		if err := w.WriteByte('\n'); err != nil {
			_ = it.Close()
			return n, err
		}
		n++
	}
	if err := it.Close(); err != nil {
		return n, err
	}
	return n, w.Flush()
}
