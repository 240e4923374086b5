package admin

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"github.com/stratadb/strata/engine"
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

// keyOptions are the options of put, get and delete: a key and, for put, a
// value, both taken as raw bytes from the arguments.
type keyOptions struct {
	global *globalOptions
	key    string
	value  string
}

// Validate rejects an empty key; pebble would store it, but from a shell it
// is nearly always a mistake (an unset variable).
func (o *keyOptions) Validate(cmd *cobra.Command) error {
	return nonEmpty(cmd, "KEY", o.key)
}

func newPutCommand(g *globalOptions) *cobra.Command {
	o := &keyOptions{global: g}
	return &cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Set KEY to VALUE",
		Long:  "put sets KEY to VALUE, both taken as raw bytes, with the configuration's sync setting.",
		Example: `  strata --db ./data put user:1 '{"name":"Ada"}'
  strata --config strata.toml put counter 0`,
		Args: argsNamed("KEY", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			o.key, o.value = args[0], args[1]
			if err := o.Validate(cmd); err != nil {
				return err
			}
			db, err := o.global.open(o.global.logger(cmd), createIfMissing)
			if err != nil {
				return err
			}
			defer closeDB(db, &err)
			return db.Put([]byte(o.key), []byte(o.value))
		},
	}
}

func newGetCommand(g *globalOptions) *cobra.Command {
	o := &keyOptions{global: g}
	return &cobra.Command{
		Use:   "get KEY",
		Short: "Print the value of KEY",
		Long: `get prints the value of KEY and a newline. For an absent key it prints
nothing on stdout, reports 'key "KEY" not found' and exits with status 1.`,
		Example: `  strata --db ./data get user:1
  strata --config strata.toml get entity:00000042`,
		Args: argsNamed("KEY"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			o.key = args[0]
			if err := o.Validate(cmd); err != nil {
				return err
			}
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
		},
	}
}

func newDeleteCommand(g *globalOptions) *cobra.Command {
	o := &keyOptions{global: g}
	return &cobra.Command{
		Use:     "delete KEY",
		Short:   "Delete KEY",
		Long:    "delete removes KEY. Deleting an absent key is not an error.",
		Example: `  strata --db ./data delete user:1`,
		Args:    argsNamed("KEY"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			o.key = args[0]
			if err := o.Validate(cmd); err != nil {
				return err
			}
			db, err := o.global.open(o.global.logger(cmd), mustExist)
			if err != nil {
				return err
			}
			defer closeDB(db, &err)
			return db.Delete([]byte(o.key))
		},
	}
}
