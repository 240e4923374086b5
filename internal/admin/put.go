package admin

import (
	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
)

// putOptions are the options of put: a key and a value, both taken as raw
// bytes from the arguments.
type putOptions struct {
	global *globalOptions
	key    string
	value  string
}

// Validate takes the arguments and rejects an empty key; pebble would store it, but from a shell it
// is nearly always a mistake (an unset variable).
func (o *putOptions) Validate(cmd *cobra.Command, args []string) error {
	o.key, o.value = args[0], args[1]
	return cli.NonEmpty(cmd, "KEY", o.key)
}

func newPutCommand(g *globalOptions) *cobra.Command {
	o := &putOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:   "put KEY VALUE",
		Short: "Set KEY to VALUE",
		Long:  "put sets KEY to VALUE, both taken as raw bytes, with the configuration's sync setting.",
		Example: `  strata --db ./data put user:1 '{"name":"Ada"}'
  strata --config strata.toml put counter 0`,
		Args: cli.Args("KEY", "VALUE"),
	}, nil, o.Validate, o.run)
}

// run puts the pair.
func (o *putOptions) run(cmd *cobra.Command, _ []string) (err error) {
	db, err := o.global.open(o.global.logger(cmd), createIfMissing)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	return db.Put([]byte(o.key), []byte(o.value))
}
