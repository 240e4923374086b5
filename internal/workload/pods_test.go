package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
)

// TestPodsGolden pins the bytes of the pods: strata bench kube's figures
// from one version to the next compare loads of the same objects.
func TestPodsGolden(t *testing.T) {
	p := NewPods(1)
	h := sha256.New()
	for i := range 3000 {
		for gen := range 3 {
			h.Write(p.Pod(i, gen))
		}
	}
	const want = "0a4442d627b4d6349b2eed73643b9f37404e69472bd7ae6398f9c3a9354d8507"
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		t.Fatalf("pods 0-2999 at generations 0-2 hash to %s, want %s", got, want)
	}
}

// TestPodsFillEveryPlaceholder checks the cut templates against
// strings.Replacer on the whole template: no placeholder is left in a
// literal, and each is filled with its own value.
func TestPodsFillEveryPlaceholder(t *testing.T) {
	p := NewPods(7)
	var vals [len(podHoles)]string
	var pairs []string
	for h, hole := range podHoles {
		vals[h] = strings.Repeat("x", h+1)
		pairs = append(pairs, hole, vals[h])
	}
	replacer := strings.NewReplacer(pairs...)
	for s := range podShapes {
		sh := p.shape(s)
		var template strings.Builder
		for k, h := range sh.holes {
			template.WriteString(sh.literals[k])
			template.WriteString(podHoles[h])
		}
		template.WriteString(sh.literals[len(sh.holes)])
		if template.Len() != sh.size {
			t.Fatalf("shape %d: literals and placeholders make %d bytes, the template %d", s, template.Len(), sh.size)
		}
		want := replacer.Replace(template.String())
		if got := string(sh.fill(&vals)); got != want {
			t.Fatalf("shape %d: filled template differs from strings.Replacer's (%d and %d bytes)", s, len(got), len(want))
		}
	}
	for i := range 50 {
		pod := p.Pod(i, i%4)
		var v map[string]any
		if err := json.Unmarshal(pod, &v); err != nil {
			t.Fatalf("pod %d: not JSON: %v", i, err)
		}
		for _, hole := range podHoles {
			if strings.Contains(string(pod), hole) {
				t.Fatalf("pod %d keeps the placeholder %s", i, hole)
			}
		}
	}
}

func BenchmarkPod(b *testing.B) {
	p := NewPods(1)
	for i := range podShapes {
		p.shape(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		p.Pod(i%100000, i%3)
	}
}
