package examples

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// goBlock is a fenced Go block of a Markdown file.
var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// TestReadmeGoCompiles type-checks every Go block of the README as the
// program it is, as a reader would paste it, so that the README cannot
// drift from the API. Each block takes the place of embedded/main.go
// through an overlay (nothing is written to the tree) and is checked
// there by go vet: a build without the link, which would take seconds.
func TestReadmeGoCompiles(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go block")
	}
	target, err := filepath.Abs(filepath.Join("embedded", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	for i, b := range blocks {
		src := filepath.Join(tmp, fmt.Sprintf("block%d.go", i))
		if err := os.WriteFile(src, b[1], 0o644); err != nil {
			t.Fatal(err)
		}
		ov, err := json.Marshal(map[string]map[string]string{"Replace": {target: src}})
		if err != nil {
			t.Fatal(err)
		}
		ovPath := filepath.Join(tmp, fmt.Sprintf("overlay%d.json", i))
		if err := os.WriteFile(ovPath, ov, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "vet", "-overlay="+ovPath, "./embedded")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README.md's Go block %d does not compile: %v\n%s%s", i+1, err, out, b[1])
		}
	}
}
