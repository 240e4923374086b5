package tune

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"github.com/stratadb/strata/config"
	"gonum.org/v1/plot/plotter"
)

// svgContent parses an SVG document and returns the text of its <text>
// elements and the number of <path> elements (gonum draws glyphs and lines
// as paths). A document that does not parse fails the test.
func svgContent(t *testing.T, doc []byte) (texts []string, paths int) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(doc))
	var inText bool
	var root string
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v\n%s", err, doc)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			inText = el.Name.Local == "text"
			if el.Name.Local == "path" {
				paths++
			}
		case xml.EndElement:
			inText = false
		case xml.CharData:
			if inText {
				texts = append(texts, string(el))
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return texts, paths
}

func count(texts []string, prefix string) int {
	n := 0
	for _, s := range texts {
		if strings.HasPrefix(strings.TrimSpace(s), prefix) {
			n++
		}
	}
	return n
}

// TestPlotRecommend renders the trade-off of a recommendation and finds
// its marks: both panels' axes, the legend's Pareto frontier and the
// chosen config by name, in each of the two panels.
func TestPlotRecommend(t *testing.T) {
	cfg := config.Default()
	b := settingOf(cfg)
	big := b
	big.BottommostBlockSize = 131072
	cs := []Candidate{cand(b, 500e3, 100, 100), cand(big, 400e3, 95, 92)}
	cs[0].Name, cs[1].Name = "the base", "lz4 / zstd:19, 4 KB / 128 KB, bloom 10"
	res := &RecommendResult{Candidates: cs, Goal: GoalSize, Bounds: DefaultBounds(), Base: cfg, Config: cfg, Source: "test data"}
	res.Chosen = choose(res.Candidates, res.Goal, res.Bounds, cfg)
	var svg bytes.Buffer
	if err := res.Plot(&svg); err != nil {
		t.Fatal(err)
	}
	texts, paths := svgContent(t, svg.Bytes())
	for prefix, want := range map[string]int{
		legendChosen + cs[1].Name:    2, // the chosen config, named in each panel's legend
		legendPareto:                 2,
		legendFrontier:               2,
		legendBase:                   2,
		"DB size (MB)":               2,
		ingestAxis:                   1,
		"Point read (MB/s)":          1,
		"tune recommend --goal size": 1,
	} {
		if got := count(texts, prefix); got != want {
			t.Errorf("%d texts start with %q, want %d; texts: %q", got, prefix, want, texts)
		}
	}
	if paths < 2*len(cs) {
		t.Errorf("%d paths, want at least one glyph per point and panel (%d)", paths, 2*len(cs))
	}

	// Without a choice (tune compression) there is no chosen mark.
	svg.Reset()
	if err := PlotTradeoff(&svg, "profiles", "Write (MB/s)", res.TradeoffPoints(), -1); err != nil {
		t.Fatal(err)
	}
	texts, _ = svgContent(t, svg.Bytes())
	if n := count(texts, legendChosen); n != 0 {
		t.Errorf("%d chosen marks without a choice", n)
	}
	if err := PlotTradeoff(&svg, "none", "Write (MB/s)", nil, -1); err == nil {
		t.Error("a plot without points is not an error")
	}
}

func TestFrontier2D(t *testing.T) {
	got := frontier2D(plotter.XYs{{X: 3, Y: 5}, {X: 1, Y: 2}, {X: 2, Y: 1}, {X: 4, Y: 4}, {X: 2, Y: 3}})
	want := plotter.XYs{{X: 1, Y: 2}, {X: 2, Y: 3}, {X: 3, Y: 5}}
	if len(got) != len(want) {
		t.Fatalf("frontier %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("frontier %v, want %v", got, want)
		}
	}
}
