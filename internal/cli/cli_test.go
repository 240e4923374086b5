package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execute runs a root built by Root with one subcommand "put KEY VALUE"
// (and a --progress flag) and returns Execute's error and what was printed.
func execute(args ...string) (string, error) {
	var p Progress
	put := &cobra.Command{
		Use:  "put KEY VALUE",
		Args: Args("KEY", "VALUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.Validate(); err != nil {
				return err
			}
			return NonEmpty(cmd, "KEY", args[0])
		},
	}
	AddProgressFlag(put.Flags(), &p, "progress `MODE`")
	root := Root(&cobra.Command{Use: "tool"})
	root.AddCommand(put)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestRootReturnsErrorsWithoutPrinting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"put", "k"}, "put: missing argument VALUE (usage: tool put KEY VALUE [flags])"},
		{[]string{"put"}, "put: missing arguments KEY and VALUE"},
		{[]string{"put", "k", "v", "x"}, `put: unexpected argument "x": takes only KEY VALUE`},
		{[]string{"put", "", "v"}, "put: argument KEY is empty"},
		{[]string{"put", "--bad", "k", "v"}, "unknown flag: --bad (see 'tool put --help')"},
		{[]string{"put", "--progress", "sometimes", "k", "v"}, `--progress "sometimes": must be auto, always or never`},
	} {
		out, err := execute(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%q: printed %q; the caller prints the error once", tc.args, out)
		}
	}
	if _, err := execute("put", "--progress", "never", "k", "v"); err != nil {
		t.Error(err)
	}
}

func TestArgsNone(t *testing.T) {
	cmd := &cobra.Command{Use: "flush"}
	err := Args()(cmd, []string{"x"})
	if err == nil || !strings.Contains(err.Error(), `flush: unexpected argument "x": takes no arguments`) {
		t.Error(err)
	}
	if err := Args()(cmd, nil); err != nil {
		t.Error(err)
	}
}

func TestProgressVisible(t *testing.T) {
	var buf bytes.Buffer // not a terminal
	for p, want := range map[Progress]bool{ProgressAlways: true, ProgressAuto: false, ProgressNever: false} {
		if got := p.Visible(&buf); got != want {
			t.Errorf("%s.Visible(buffer) = %v", p, got)
		}
	}
}
