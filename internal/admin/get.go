package admin

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/engine"
	"github.com/stratadb/strata/internal/cli"
)

// NotFoundError is returned by get for an absent key. It wraps
// engine.ErrNotFound, so errors.Is(err, engine.ErrNotFound) holds.
type NotFoundError struct {
	// Key is the key that was looked up.
	Key string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("key %q not found", e.Key) }

// Unwrap returns engine.ErrNotFound.
func (e *NotFoundError) Unwrap() error { return engine.ErrNotFound }

// getOptions are the options of get: the key, taken as raw bytes.
type getOptions struct {
	global *globalOptions
	key    string
}

// Validate takes the arguments and rejects an empty key, as put does.
func (o *getOptions) Validate(cmd *cobra.Command, args []string) error {
	o.key = args[0]
	return cli.NonEmpty(cmd, "KEY", o.key)
}

func newGetCommand(g *globalOptions) *cobra.Command {
	o := &getOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "get KEY",
		Short: "Print the value of KEY",
		Long: `get prints the value of KEY and a newline. For an absent key it prints
nothing on stdout, reports 'key "KEY" not found' and exits with status 1.`,
		Example: `  strata --db ./data get user:1
  strata --config strata.toml get entity:00000042`,
		Args: cli.Args("KEY"),
	}, nil, o.Validate, o.run)
}

// run prints the value.
func (o *getOptions) run(cmd *cobra.Command, _ []string) (err error) {
	db, err := o.global.open(o.global.logger(cmd), readOnly)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	v, err := db.Get([]byte(o.key))
	if errors.Is(err, engine.ErrNotFound) {
		return &NotFoundError{Key: o.key}
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", v)
	return err
}
