package report_test

import (
	"fmt"
	"os"

	"github.com/stratadb/strata/internal/report"
)

func ExampleTable_Render() {
	t := report.Table{
		Columns: []report.Column{
			{Name: "Codec"},
			{Name: "Ratio", Format: "%.2fx"},
			{Name: "Compress", Unit: "MB/s", Format: "%.1f"},
		},
		Rows:  [][]any{{"lz4", 1.65, 512.34}},
		Notes: []string{"1 MB = 1,000,000 bytes."},
	}
	for _, format := range []string{"table", "json"} {
		if err := t.Render(os.Stdout, format); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// Codec    Ratio    Compress (MB/s)
	// ---------------------------------
	// lz4      1.65x              512.3
	//
	// 1 MB = 1,000,000 bytes.
	// [
	//   {"codec": "lz4", "ratio": 1.65, "compress_mb_s": 512.34}
	// ]
}

func ExampleParseFormat() {
	_, err := report.ParseFormat("yaml")
	fmt.Println(err)
	// Output: report: unknown format "yaml": allowed are table, markdown, json, csv
}
