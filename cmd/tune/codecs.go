package main

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/stratadb/strata/internal/rawcodec"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/report"
	"github.com/stratadb/strata/internal/tune"
)

// codecsOptions are the options of codecs.
type codecsOptions struct {
	global    *globalOptions
	data      dataOptions
	blockSize int
	codecs    string
	minTime   time.Duration
	format    report.Format

	parsed []string // set by Validate; nil means every codec
}

// AddFlags registers codecs' flags.
func (o *codecsOptions) AddFlags(fs *pflag.FlagSet) {
	o.data.AddFlags(fs)
	fs.IntVar(&o.blockSize, "block-size", config.Default().BlockSize, "cut the data into blocks of `BYTES` bytes, as a table's data blocks")
	fs.StringVar(&o.codecs, "codecs", "", "comma-separated `LIST` of raw codecs (default: all of none, lz4, snappy, zstd:1/3/6/9/19, minlz, minlz-balanced, s2)")
	fs.DurationVar(&o.minTime, "min-time", tune.DefaultCodecsMinTime, "time each codec's compression and decompression for at least `DURATION`")
	formatFlag(fs, &o.format, allFormats...)
}

// Validate checks the flags.
func (o *codecsOptions) Validate() error {
	errs := []error{o.global.Validate(), o.data.Validate()}
	if o.blockSize < 1 || o.blockSize > rawcodec.MaxBlockSize {
		errs = append(errs, fmt.Errorf("--block-size %d: must be from 1 to %d", o.blockSize, rawcodec.MaxBlockSize))
	}
	if o.minTime <= 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.minTime))
	}
	if o.codecs != "" {
		p, err := tune.ParseCodecList(o.codecs)
		errs = append(errs, err)
		o.parsed = p
	}
	return errors.Join(errs...)
}

func newCodecsCommand(g *globalOptions) *cobra.Command {
	o := &codecsOptions{global: g}
	cmd := &cobra.Command{
		Use:   "codecs",
		Short: "Measure the raw block codecs: ratio and speed on one core",
		Long: `codecs cuts the data (key+value of each entity) into blocks of --block-size
bytes, as a table's data blocks, and measures each raw codec on one core:
ratio, compression and decompression speed (MB = MiB of uncompressed data per
second). lz4 is true LZ4 (pierrec/lz4/v4), shown beside minlz, which is what
Strata stores when a config asks for lz4; Pebble's table format has no LZ4.`,
		Example: `  tune codecs
  tune codecs --block-size 32768 --codecs lz4,minlz,snappy,zstd:3
  tune codecs --input entities.jsonl --min-time 1s --format markdown`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *codecsOptions) run(cmd *cobra.Command) error {
	data, err := o.data.load()
	if err != nil {
		return err
	}
	bar := o.global.bar(cmd)
	res, err := tune.RunCodecs(cmd.Context(), tune.CodecsOptions{
		Data:      data,
		BlockSize: o.blockSize,
		Codecs:    o.parsed,
		MinTime:   o.minTime,
		Progress:  bar,
	})
	if err != nil {
		bar.Abort()
		return err
	}
	bar.Finish()
	var out bytes.Buffer
	if err := res.Table().Write(&out, o.format); err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(out.Bytes())
	return err
}
