package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// execute runs a root built by Root with one subcommand "put KEY VALUE"
// (with a --progress flag), built by Command, and returns what was printed,
// whether put's run was reached and Execute's error.
func execute(args ...string) (out string, ran bool, err error) {
	var p Progress
	put := Command(&cobra.Command{Use: "put KEY VALUE", Args: Args("KEY", "VALUE")},
		func(fs *pflag.FlagSet) { AddProgressFlag(fs, &p, "progress `MODE`") },
		func(cmd *cobra.Command, args []string) error {
			return errors.Join(p.Validate(), NonEmpty(cmd, "KEY", args[0]))
		},
		func(*cobra.Command, []string) error { ran = true; return nil })
	root := Root(&cobra.Command{Use: "tool"})
	root.AddCommand(put)
	var buf bytes.Buffer
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs(args)
	err = root.Execute()
	return buf.String(), ran, err
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
		{[]string{"put", "--progress", "sometimes", "", "v"}, "argument KEY is empty"}, // every bad input named at once
	} {
		out, ran, err := execute(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one containing %q", tc.args, err, tc.want)
		}
		if out != "" {
			t.Errorf("%q: printed %q; the caller prints the error once", tc.args, out)
		}
		if ran {
			t.Errorf("%q: the command ran on bad input", tc.args)
		}
	}
	if _, ran, err := execute("put", "--progress", "never", "k", "v"); err != nil || !ran {
		t.Errorf("good input: err %v, ran %v", err, ran)
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
