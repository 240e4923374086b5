package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Generator makes entity documents. It holds no mutable state, so one
// Generator may serve any number of goroutines.
type Generator struct {
	seed int64
	size int
}

// New returns a Generator of documents of about size bytes from seed. Sizes
// from 512 up are met within ±10% (in practice within a few bytes below);
// below that a document drops its optional parts and may exceed size.
func New(seed int64, size int) *Generator { return &Generator{seed: seed, size: size} }

// Seed returns the generator's seed.
func (g *Generator) Seed() int64 { return g.seed }

// Size returns the target document size in bytes.
func (g *Generator) Size() int { return g.size }

// Key returns the key of entity i: "entity:" and i in at least 8 digits
// (entity:00000042). Keys sort in entity order for i below 100,000,000.
func Key(i int) []byte { return fmt.Appendf(nil, "entity:%08d", i) }

// Document shape. Field order is the JSON order.
type entity struct {
	ID       int       `json:"id"`
	Ref      string    `json:"ref"`
	Type     string    `json:"type"`
	Status   string    `json:"status,omitempty"`
	Lang     string    `json:"lang,omitempty"`
	Created  string    `json:"created"`
	Updated  string    `json:"updated,omitempty"`
	Author   *author   `json:"author,omitempty"`
	Tags     []string  `json:"tags,omitempty"`
	Rating   *float64  `json:"rating,omitempty"`
	Price    *price    `json:"price,omitempty"`
	Stats    *stats    `json:"stats,omitempty"`
	Address  *address  `json:"address,omitempty"`
	Featured *bool     `json:"featured,omitempty"`
	Title    string    `json:"title"`
	Summary  string    `json:"summary,omitempty"`
	Body     string    `json:"body,omitempty"`
	Extra    []comment `json:"comments,omitempty"`
}

type author struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Email    string `json:"email"`
	Verified bool   `json:"verified"`
}

type price struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
	InStock  int     `json:"in_stock"`
}

type stats struct {
	Views    int `json:"views"`
	Likes    int `json:"likes"`
	Comments int `json:"comments"`
	Shares   int `json:"shares"`
}

type address struct {
	Street   string `json:"street"`
	City     string `json:"city"`
	Postcode string `json:"postcode"`
	Country  string `json:"country"`
	Geo      geo    `json:"geo"`
}

type geo struct {
	Lat float64 `json:"lat"`
	Lon float64 `json:"lon"`
}

type comment struct {
	User string `json:"user"`
	Text string `json:"text"`
}

// splitmix64 scrambles x; it makes the per-entity seeds of neighbouring
// entities unrelated.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// epoch is the earliest created timestamp.
var epoch = time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// Entity returns document i: a JSON object (json.Valid holds) of about the
// generator's size, a pure function of the seed, the size and i. The bytes
// depend only on math/rand/v2's PCG and encoding/json, so they hold across
// runs, machines and Go releases that keep those stable.
func (g *Generator) Entity(i int) []byte {
	r := rand.New(rand.NewPCG(splitmix64(uint64(g.seed)), splitmix64(uint64(i)^0x5bd1e9955bd1e995)))
	t := newTextGen(r)

	created := epoch + r.Int64N(5*365*86400)
	e := entity{
		ID:      i,
		Ref:     fmt.Sprintf("%012x", r.Uint64()&(1<<48-1)),
		Type:    pick(r, types),
		Status:  pick(r, statuses),
		Lang:    pick(r, langs),
		Created: timestamp(created),
		Title:   t.title(),
	}
	if r.IntN(3) > 0 {
		e.Updated = timestamp(created + r.Int64N(400*86400))
	}
	first, last := pick(r, firstNames), pick(r, lastNames)
	e.Author = &author{
		ID:       1 + r.IntN(50000),
		Name:     first + " " + last,
		Email:    strings.ToLower(first) + "." + strings.ToLower(last) + emailSuffix(r) + "@" + pick(r, domains),
		Verified: r.IntN(4) > 0,
	}
	e.Tags = make([]string, 1+r.IntN(4))
	for j := range e.Tags {
		e.Tags[j] = pick(r, tags)
	}
	if e.Type == "review" || e.Type == "product" || r.IntN(3) == 0 {
		v := float64(10+r.IntN(41)) / 10
		e.Rating = &v
	}
	if e.Type == "product" || e.Type == "listing" || r.IntN(4) == 0 {
		e.Price = &price{
			Amount:   float64(99+r.IntN(49900)) / 100,
			Currency: pick(r, currencies),
			InStock:  r.IntN(250),
		}
	}
	views := 1<<r.IntN(16) + r.IntN(1000) // heavy-tailed, integers only
	e.Stats = &stats{
		Views:    views,
		Likes:    r.IntN(views/10 + 1),
		Comments: r.IntN(views/40 + 1),
		Shares:   r.IntN(views/80 + 1),
	}
	if r.IntN(10) < 7 {
		c := cities[r.IntN(len(cities))]
		e.Address = &address{
			Street:   strconv.Itoa(1+r.IntN(400)) + " " + pick(r, streets) + " " + pick(r, streetKinds),
			City:     c.name,
			Postcode: fmt.Sprintf("%05d", r.IntN(100000)),
			Country:  c.country,
			Geo: geo{
				Lat: jitter(r, c.lat),
				Lon: jitter(r, c.lon),
			},
		}
	}
	if r.IntN(8) == 0 {
		b := true
		e.Featured = &b
	}

	doc := marshal(&e)
	// Small sizes shed optional parts until some text fits.
	for _, drop := range drops {
		if len(doc) <= g.size-40 {
			break
		}
		drop(&e)
		doc = marshal(&e)
	}
	room := g.size - len(doc)
	// A summary in most documents with room for more than a short body.
	if room > 300 && r.IntN(4) > 0 {
		e.Summary = t.text(min(room/4, 120+r.IntN(200)), false)
		doc = marshal(&e)
		room = g.size - len(doc)
	}
	// Longer documents carry a few comments, as nested text.
	if room > 1500 && r.IntN(2) == 0 {
		for range 1 + r.IntN(3) {
			e.Extra = append(e.Extra, comment{
				User: strings.ToLower(pick(r, firstNames)) + strconv.Itoa(r.IntN(1000)),
				Text: t.text(min(room/8, 60+r.IntN(240)), false),
			})
		}
		doc = marshal(&e)
		room = g.size - len(doc)
	}
	// The body takes the rest: `,"body":"..."` costs 10 bytes beyond its text.
	if room > 10+8 {
		e.Body = t.text(room-10, true)
		doc = marshal(&e)
	}
	return doc
}

// drops remove optional parts of a document, least essential first.
var drops = []func(*entity){
	func(e *entity) { e.Featured = nil },
	func(e *entity) { e.Updated = "" },
	func(e *entity) { e.Lang = "" },
	func(e *entity) { e.Address = nil },
	func(e *entity) { e.Price = nil },
	func(e *entity) { e.Tags = e.Tags[:min(len(e.Tags), 1)] },
	func(e *entity) { e.Stats = nil },
	func(e *entity) { e.Rating = nil },
	func(e *entity) { e.Author = nil },
	func(e *entity) { e.Tags = nil },
	func(e *entity) { e.Status = "" },
}

// marshal encodes e without HTML escaping, so text costs its own length
// (the text has no quotes or backslashes; newlines cost two bytes).
func marshal(e *entity) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		// entity holds only strings, numbers and bools.
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// jitter moves a coordinate by up to ±0.1 degree, to 5 decimals. It works in
// integers, so no platform's floating-point fusion can change a digit.
func jitter(r *rand.Rand, deg float64) float64 {
	return float64(int64(math.Round(deg*1e5))+r.Int64N(20001)-10000) / 1e5
}

func timestamp(unix int64) string { return time.Unix(unix, 0).UTC().Format(time.RFC3339) }

func pick(r *rand.Rand, list []string) string { return list[r.IntN(len(list))] }

func emailSuffix(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return ""
	}
	return strconv.Itoa(r.IntN(100))
}

// textGen writes English-like text: words from the vocabulary with a Zipf
// frequency, sentences of varied length and punctuation, occasional names,
// places and numbers.
type textGen struct {
	r *rand.Rand
}

// zipfS and zipfV shape the word frequency: rank k (from 0) is drawn with
// probability proportional to (zipfV + k)^-zipfS, the distribution of
// rand.NewZipf, drawn from a precomputed table (several times faster).
const (
	zipfS = 1.1
	zipfV = 2
)

// zipfCDF[k] is the probability of drawing a rank <= k; zipfGuide[j] is the
// first rank k with zipfCDF[k] >= j/len(zipfGuide), where a search for u in
// [j/len, (j+1)/len) can start.
var zipfCDF, zipfGuide = func() ([]float64, []int) {
	cdf := make([]float64, len(words))
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(zipfV+float64(k), -zipfS)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	cdf[len(cdf)-1] = 1
	guide := make([]int, 4096)
	k := 0
	for j := range guide {
		for cdf[k] < float64(j)/float64(len(guide)) {
			k++
		}
		guide[j] = k
	}
	return cdf, guide
}()

func newTextGen(r *rand.Rand) *textGen { return &textGen{r: r} }

// rank draws a word rank from the Zipf distribution.
func (t *textGen) rank() int {
	u := t.r.Float64()
	k := zipfGuide[int(u*float64(len(zipfGuide)))]
	for zipfCDF[k] < u {
		k++
	}
	return k
}

func (t *textGen) word() string {
	switch t.r.IntN(60) {
	case 4, 5, 6, 7, 8, 9:
		return phrases[t.rank()%len(phrases)]
	case 0:
		return cities[t.r.IntN(len(cities))].name
	case 1:
		return pick(t.r, firstNames)
	case 2:
		return strconv.Itoa(t.r.IntN(100))
	case 3:
		return strconv.Itoa(1990 + t.r.IntN(36))
	}
	return words[t.rank()]
}

// title returns a short capitalised phrase without final punctuation, of
// words mostly past the most frequent few.
func (t *textGen) title() string {
	n := 3 + t.r.IntN(7)
	ws := make([]string, n)
	for i := range ws {
		k := t.rank()
		for try := 0; k < 30 && try < 4; try++ {
			k = t.rank()
		}
		ws[i] = capitalize(words[k])
	}
	return strings.Join(ws, " ")
}

// sentence appends one sentence to b.
func (t *textGen) sentence(b []byte) []byte {
	n := 3 + t.r.IntN(10) + t.r.IntN(12)
	for i := range n {
		w := t.word()
		if i == 0 {
			w = capitalize(w)
		} else {
			b = append(b, ' ')
		}
		b = append(b, w...)
		if i < n-1 {
			switch t.r.IntN(40) {
			case 0, 1, 2:
				b = append(b, ',')
			case 3:
				b = append(b, ';')
			case 4:
				b = append(b, " -"...)
			}
		}
	}
	switch t.r.IntN(20) {
	case 0, 1:
		return append(b, '?')
	case 2:
		return append(b, '!')
	}
	return append(b, '.')
}

// text returns sentences of at most budget bytes as encoded in JSON, ending
// with sentence punctuation; with paragraphs, blank lines split it every few
// sentences. The last sentence is cut at a word to fit.
func (t *textGen) text(budget int, paragraphs bool) string {
	var b, s []byte
	cost := 0 // JSON-encoded length of b
	inPara := 0
	paraLen := 3 + t.r.IntN(5)
	for {
		sep := ""
		if len(b) > 0 {
			sep = " "
			if paragraphs && inPara >= paraLen {
				sep = "\n\n"
				inPara = 0
				paraLen = 2 + t.r.IntN(6)
			}
		}
		sepCost := len(sep) + strings.Count(sep, "\n")
		s = t.sentence(s[:0])
		if cost+sepCost+len(s) <= budget {
			b = append(append(b, sep...), s...)
			cost += sepCost + len(s)
			inPara++
			continue
		}
		// Cut the sentence at a word to fill the rest, ending with a period.
		room := budget - cost - sepCost - 1
		cut := bytes.LastIndexByte(s[:max(room+1, 0)], ' ')
		if room >= 2 && cut > 0 {
			s = bytes.TrimRight(s[:cut], ",;-: ")
			b = append(append(append(b, sep...), s...), '.')
		}
		return string(b)
	}
}

func capitalize(w string) string {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return w
	}
	return string(w[0]-'a'+'A') + w[1:]
}
