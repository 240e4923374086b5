package tune

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stratadb/strata/compression"
	"github.com/stratadb/strata/config"
	"github.com/stratadb/strata/internal/cli"
	"github.com/stratadb/strata/internal/rawcodec"
	"github.com/stratadb/strata/internal/report"
)

// DefaultCodecsMinTime is the default minimum time Measure spends on each
// of compression and decompression per codec: short, so that `tune codecs`
// finishes in seconds; raise it for steadier figures.
const DefaultCodecsMinTime = 300 * time.Millisecond

// CodecsOptions configure RunCodecs.
type CodecsOptions struct {
	// Data is cut into blocks: key+value of each entity, concatenated.
	// Required.
	Data *Dataset
	// BlockSize is the block size in bytes; 0 means config.Default()'s.
	BlockSize int
	// Codecs are raw codec names (rawcodec.Names); nil means every
	// codec of rawcodec.All.
	Codecs []string
	// MinTime is the minimum time of each timed pass; 0 means
	// DefaultCodecsMinTime.
	MinTime time.Duration
	// Progress receives progress, one unit per codec; nil is silent.
	Progress Progress

	// The command line of tune codecs: addFlags binds them (and BlockSize
	// and MinTime), validateFlags parses them into the fields above.
	global *globalFlags
	data   dataFlags
	codecs string
	format report.Format
}

// ParseCodecList parses a comma-separated list of raw codec names; an
// unknown name is an error listing the allowed names.
func ParseCodecList(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if _, err := rawcodec.ByName(name); err != nil {
			return nil, fmt.Errorf("--codecs: %w", err)
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--codecs %q: no codec given: allowed are %s", s, strings.Join(rawcodec.Names(), ", "))
	}
	return out, nil
}

// Validate checks the options.
func (o *CodecsOptions) Validate() error {
	var errs []error
	if o.Data == nil || o.Data.Len() == 0 {
		errs = append(errs, errors.New("tune: no data to compress"))
	}
	if o.BlockSize < 0 || o.BlockSize > rawcodec.MaxBlockSize {
		errs = append(errs, fmt.Errorf("--block-size %d: must be from 1 to %d", o.BlockSize, rawcodec.MaxBlockSize))
	}
	if o.MinTime < 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.MinTime))
	}
	for _, name := range o.Codecs {
		if _, err := rawcodec.ByName(name); err != nil {
			errs = append(errs, fmt.Errorf("--codecs: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CodecRow is one codec's figures.
type CodecRow struct {
	// Result is rawcodec.Measure's outcome (its speeds in decimal MB/s).
	rawcodec.Result
	// CompressMiBps and DecompressMiBps are the speeds in MiB/s of
	// uncompressed data on one core.
	CompressMiBps, DecompressMiBps float64
	// InStrata says what a config naming this codec gets in a table.
	InStrata string
}

// CodecsResult is the outcome of RunCodecs.
type CodecsResult struct {
	// Rows holds one row per codec, in the order measured.
	Rows []CodecRow
	// Source describes the data; Blocks, BlockSize and RawBytes the blocks.
	Source    string
	Blocks    int
	BlockSize int
	RawBytes  int64
	// MinTime is the minimum time of each timed pass.
	MinTime time.Duration
}

// RunCodecs cuts the data into blocks as a table's data blocks
// (rawcodec.SplitBlocks of key+value entries) and measures each codec
// with rawcodec.Measure on the calling goroutine: one core.
func RunCodecs(ctx context.Context, o CodecsOptions) (*CodecsResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	blockSize := o.BlockSize
	if blockSize == 0 {
		blockSize = config.Default().BlockSize
	}
	minTime := o.MinTime
	if minTime == 0 {
		minTime = DefaultCodecsMinTime
	}
	var codecs []rawcodec.Block
	if o.Codecs == nil {
		codecs = rawcodec.All()
	} else {
		for _, name := range o.Codecs {
			b, err := rawcodec.ByName(name)
			if err != nil {
				return nil, fmt.Errorf("--codecs: %w", err)
			}
			codecs = append(codecs, b)
		}
	}
	blocks := rawcodec.SplitBlocks(o.Data.entries(), blockSize)
	res := &CodecsResult{Source: o.Data.Source, Blocks: len(blocks), BlockSize: blockSize, MinTime: minTime}
	for _, b := range blocks {
		res.RawBytes += int64(len(b))
	}
	p := orNop(o.Progress)
	p.Start(int64(len(codecs)))
	for _, c := range codecs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.Describe(c.Name())
		settle()
		r, err := rawcodec.Measure(c, blocks, minTime)
		if err != nil {
			return nil, err
		}
		res.Rows = append(res.Rows, CodecRow{
			Result:          r,
			CompressMiBps:   r.CompressMBps * 1e6 / MiB,
			DecompressMiBps: r.DecompressMBps * 1e6 / MiB,
			InStrata:        inStrata(c.Name()),
		})
		p.Add(1)
	}
	return res, nil
}

// inStrata says what a table gets when a config names the raw codec.
func inStrata(name string) string {
	switch name {
	case "lz4":
		return "stored as minlz"
	case "minlz-balanced":
		return "no: Strata's minlz is the fastest level"
	case "s2":
		return "no"
	}
	if c, err := compression.ParseCodec(name); err == nil {
		return c.String()
	}
	return "no"
}

// Table returns the result as a report.Table.
func (res *CodecsResult) Table() *report.Table {
	t := &report.Table{Columns: []report.Column{
		{Name: "Codec"},
		{Name: "Ratio", Format: "%.2fx"},
		{Name: "Compress", Unit: "MB/s", Format: "%.1f"},
		{Name: "Decompress", Unit: "MB/s", Format: "%.1f"},
		{Name: "In Strata"},
	}}
	for _, r := range res.Rows {
		t.Rows = append(t.Rows, []any{r.Codec, r.Ratio, r.CompressMiBps, r.DecompressMiBps, r.InStrata})
	}
	t.Notes = []string{
		fmt.Sprintf("Data: %s, cut into %d blocks of ~%d bytes (key+value entries, as a table's data blocks), %.1f MB in all.", res.Source, res.Blocks, res.BlockSize, mib(res.RawBytes)),
		fmt.Sprintf("MB = MiB = 1,048,576 bytes of uncompressed data per second of one core; each speed is timed over at least %s.", res.MinTime),
		"lz4 = true LZ4 (pierrec/lz4); Strata stores a requested lz4 as minlz.",
		"zstd here is klauspost/compress, which has 4 presets: levels 1-2, 3-5, 6-9 and 10+ each give the same output. Inside tables Pebble uses C zstd (DataDog/zstd) when built with cgo, klauspost/compress without.",
	}
	return t
}

// addFlags registers codecs' flags.
func (o *CodecsOptions) addFlags(fs *pflag.FlagSet) {
	o.data.addFlags(fs)
	fs.IntVar(&o.BlockSize, "block-size", config.Default().BlockSize, "cut the data into blocks of `BYTES` bytes, as a table's data blocks")
	fs.StringVar(&o.codecs, "codecs", "", "comma-separated `LIST` of raw codecs (default: all of none, lz4, snappy, zstd:1/3/6/9/19, minlz, minlz-balanced, s2)")
	fs.DurationVar(&o.MinTime, "min-time", DefaultCodecsMinTime, "time each codec's compression and decompression for at least `DURATION`")
	formatFlag(fs, &o.format, allFormats...)
}

// validateFlags checks the flags and parses --codecs.
func (o *CodecsOptions) validateFlags(*cobra.Command, []string) error {
	errs := []error{o.global.progress.Validate(), o.data.validate()}
	if o.BlockSize < 1 || o.BlockSize > rawcodec.MaxBlockSize {
		errs = append(errs, fmt.Errorf("--block-size %d: must be from 1 to %d", o.BlockSize, rawcodec.MaxBlockSize))
	}
	if o.MinTime <= 0 {
		errs = append(errs, fmt.Errorf("--min-time %s: must be > 0", o.MinTime))
	}
	if o.codecs != "" {
		p, err := ParseCodecList(o.codecs)
		errs = append(errs, err)
		o.Codecs = p
	}
	return errors.Join(errs...)
}

func newCodecsCommand(g *globalFlags) *cobra.Command {
	o := &CodecsOptions{global: g}
	return cli.Command(&cobra.Command{
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
		Args: cli.Args(),
	}, o.addFlags, o.validateFlags, o.run)
}

// run measures and prints the table once every codec is measured.
func (o *CodecsOptions) run(cmd *cobra.Command, _ []string) error {
	data, err := o.data.load()
	if err != nil {
		return err
	}
	bar := o.global.bar(cmd)
	o.Data, o.Progress = data, bar
	res, err := RunCodecs(cmd.Context(), *o)
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
