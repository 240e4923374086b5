// Package cli holds the shape both Strata tools share, strata (package
// internal/admin) and tune (package internal/tune): a root cobra command
// that returns errors instead of printing them, positional arguments named
// in their errors, and the test for a terminal that decides whether a
// progress bar is drawn, and Command, the flow of every command (its
// flags; validate every flag and argument, then run). Each tool keeps one
// file per command, holding its options, flags, validation and run, in the
// manner of bbolt's cmd/bbolt/command; its cmd/<tool>/main.go only executes
// the root.
package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// Root applies the settings both tools share to root and returns it. The
// error of a failed command is returned from Execute, so the tool's main
// prints it once and exits with status 1; usage is not repeated after
// every error (argument errors carry the usage line, flag errors point to
// --help); the completion command is hidden.
func Root(root *cobra.Command) *cobra.Command {
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	return root
}

// Command gives cmd the flow of a command in this layout: addFlags
// registers its flags on cmd.Flags(), and RunE calls validate, which
// checks every flag and argument (naming each bad one), then run, so that
// no work starts on bad input. addFlags and validate may be nil.
func Command(cmd *cobra.Command, addFlags func(*pflag.FlagSet), validate, run func(*cobra.Command, []string) error) *cobra.Command {
	if addFlags != nil {
		addFlags(cmd.Flags())
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if validate != nil {
			if err := validate(cmd, args); err != nil {
				return err
			}
		}
		return run(cmd, args)
	}
	return cmd
}

// Args accepts exactly len(names) positional arguments and names the
// missing or unexpected ones in its error, with the usage line. Args()
// accepts none.
func Args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			missing := names[len(args):]
			noun := "argument"
			if len(missing) > 1 {
				noun = "arguments"
			}
			return fmt.Errorf("%s: missing %s %s (usage: %s)", cmd.Name(), noun, strings.Join(missing, " and "), cmd.UseLine())
		case len(args) > len(names):
			what := "no arguments"
			if len(names) > 0 {
				what = "only " + strings.Join(names, " ")
			}
			return fmt.Errorf("%s: unexpected argument %q: takes %s (usage: %s)", cmd.Name(), args[len(names)], what, cmd.UseLine())
		}
		return nil
	}
}

// NonEmpty reports an empty positional argument by name: from a shell, an
// empty argument is nearly always an unset variable.
func NonEmpty(cmd *cobra.Command, name, value string) error {
	if value == "" {
		return fmt.Errorf("%s: argument %s is empty", cmd.Name(), name)
	}
	return nil
}

// IsTerminal reports whether w is a terminal, where a progress bar may
// redraw itself; on a file or a pipe, progress is written as lines or not
// at all.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress is the value of a --progress flag: whether a long-running
// command draws a progress bar on standard error.
type Progress string

// The values of --progress.
const (
	// ProgressAuto draws the bar when standard error is a terminal.
	ProgressAuto Progress = "auto"
	// ProgressAlways draws it on any standard error.
	ProgressAlways Progress = "always"
	// ProgressNever draws none.
	ProgressNever Progress = "never"
)

// AddProgressFlag registers --progress on fs, ProgressAuto by default,
// with the given usage text (its MODE is the placeholder).
func AddProgressFlag(fs *pflag.FlagSet, p *Progress, usage string) {
	*p = ProgressAuto
	fs.Var((*progressValue)(p), "progress", usage)
}

// Validate reports a mode other than auto, always and never. It is checked
// with the command's other flags, so that every bad flag is named at once.
func (p Progress) Validate() error {
	switch p {
	case ProgressAuto, ProgressAlways, ProgressNever:
		return nil
	}
	return fmt.Errorf("--progress %q: must be auto, always or never", string(p))
}

// Visible reports whether a bar on w is drawn: always, or auto on a
// terminal.
func (p Progress) Visible(w io.Writer) bool {
	return p == ProgressAlways || (p == ProgressAuto && IsTerminal(w))
}

// progressValue binds a Progress to a flag; any string is accepted at
// parse time and checked by Progress.Validate.
type progressValue Progress

func (v *progressValue) String() string     { return string(*v) }
func (v *progressValue) Set(s string) error { *v = progressValue(s); return nil }
func (v *progressValue) Type() string       { return "string" }
