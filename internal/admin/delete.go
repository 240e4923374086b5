package admin

import (
	"github.com/spf13/cobra"
	"github.com/stratadb/strata/internal/cli"
)

// deleteOptions are the options of delete: the key, taken as raw bytes.
type deleteOptions struct {
	global *globalOptions
	key    string
}

// Validate takes the arguments and rejects an empty key, as put does.
func (o *deleteOptions) Validate(cmd *cobra.Command, args []string) error {
	o.key = args[0]
	return cli.NonEmpty(cmd, "KEY", o.key)
}

func newDeleteCommand(g *globalOptions) *cobra.Command {
	o := &deleteOptions{global: g}
	return cli.Command(&cobra.Command{
		Use:     "delete KEY",
		Short:   "Delete KEY",
		Long:    "delete removes KEY. Deleting an absent key is not an error.",
		Example: `  strata --db ./data delete user:1`,
		Args:    cli.Args("KEY"),
	}, nil, o.Validate, o.run)
}

// run deletes the key.
func (o *deleteOptions) run(cmd *cobra.Command, _ []string) (err error) {
	db, err := o.global.open(o.global.logger(cmd), mustExist)
	if err != nil {
		return err
	}
	defer closeDB(db, &err)
	return db.Delete([]byte(o.key))
}
