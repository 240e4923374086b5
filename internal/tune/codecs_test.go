package tune

import (
	"bytes"
	"context"
	"github.com/stratadb/strata/internal/rawcodec"
	"strings"
	"testing"
	"time"
)

func TestCodecsTable(t *testing.T) {
	res, err := RunCodecs(context.Background(), CodecsOptions{Data: smallData(t), MinTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := rawcodec.All()
	if len(res.Rows) != len(want) {
		t.Fatalf("%d rows, want one per raw codec (%d)", len(res.Rows), len(want))
	}
	for i, row := range res.Rows {
		if row.Codec != want[i].Name() {
			t.Errorf("row %d is %s, want %s", i, row.Codec, want[i].Name())
		}
		if row.Codec == "none" {
			if row.Ratio != 1 {
				t.Errorf("none: ratio %v", row.Ratio)
			}
		} else if row.Ratio <= 1 {
			t.Errorf("%s: ratio %.3f, want > 1 on JSON documents", row.Codec, row.Ratio)
		}
		if !(row.CompressMiBps > 0 && row.DecompressMiBps > 0) {
			t.Errorf("%s: speeds %v %v", row.Codec, row.CompressMiBps, row.DecompressMiBps)
		}
	}
	if res.BlockSize != 4096 || res.Blocks < 2 {
		t.Errorf("block size %d, %d blocks", res.BlockSize, res.Blocks)
	}
	var text bytes.Buffer
	if err := res.Table().Render(&text, "table"); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"lz4 = true LZ4 (pierrec/lz4); Strata stores a requested lz4 as minlz", "stored as minlz", "s2"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, text.String())
		}
	}
	rows := jsonRows(t, res.Table())
	for _, key := range []string{"codec", "ratio", "compress_mb_s", "decompress_mb_s", "in_strata"} {
		if _, ok := rows[0][key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
}

func TestCodecsList(t *testing.T) {
	names, err := ParseCodecList("lz4, zstd:2 ,minlz")
	if err != nil {
		t.Fatal(err)
	}
	res, err := RunCodecs(context.Background(), CodecsOptions{Data: smallData(t), Codecs: names, BlockSize: 32 << 10, MinTime: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 || res.Rows[1].Codec != "zstd:2" || res.BlockSize != 32<<10 {
		t.Fatalf("%+v", res.Rows)
	}
	if _, err := ParseCodecList("lz4,brotli"); err == nil || !strings.Contains(err.Error(), `"brotli"`) || !strings.Contains(err.Error(), "allowed are") {
		t.Errorf("unknown codec: %v", err)
	}
}
