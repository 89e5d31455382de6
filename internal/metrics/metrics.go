// Package metrics keeps counters, histograms and gauges and writes them
// in Prometheus' text exposition format, version 0.0.4, byte for byte as
// client_golang's text encoder does: the same names, order, escapes and
// number forms. It serves corral agent's /metrics.
//
// It exists because that format is small and client_golang was 45
// packages (client_model, common, procfs, protobuf and others): about
// 14 CPU-seconds of -race compilation on a newcomer's first
// `go test -race ./...`, and 3.5 ms of package init in every start of
// the corral binary, which the tests start hundreds of times.
//
// A Registry is the only state (no globals: tests run several agents in
// one process). Counters and histograms are updated as things happen;
// gauges are computed when the registry is written (Collect), as are the
// process and Go runtime metrics (AddRuntime). Check validates
// exposition text by the format's rules; this package's tests run it
// over everything it writes, and CI's full run also feeds the output to
// client_golang's own linter and parser (testdata/promlint).
package metrics

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// ContentType is the Content-Type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// A Registry holds metric families and writes them. It is safe for
// concurrent use.
type Registry struct {
	mu       sync.Mutex
	fams     []family // sorted by name
	collects []func(*Scrape)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

type kind int

const (
	counterKind kind = iota
	gaugeKind
	histogramKind
)

func (k kind) String() string {
	return [...]string{"counter", "gauge", "histogram"}[k]
}

// desc describes a family: its name, help, type and label names.
type desc struct {
	name, help string
	kind       kind
	labels     []string // as given
	sorted     []string // by name, as the labels are written
	order      []int    // sorted[i] is labels[order[i]]
	bounds     []float64
}

// family is a registered family: a vector (its children's current
// values) or one computed at scrape time (what s holds for it).
type family interface {
	desc() *desc
	series(s *Scrape) []series
}

// series is one label set's current value (or histogram).
type series struct {
	values []string // in the order of desc.sorted
	value  float64
	hist   *histSnapshot
}

func newDesc(name, help string, k kind, labels []string) *desc {
	if !validMetricName(name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", name))
	}
	d := &desc{name: name, help: help, kind: k, labels: slices.Clone(labels)}
	seen := map[string]bool{}
	for _, l := range labels {
		if !validLabelName(l) || strings.HasPrefix(l, "__") {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", name, l))
		}
		if k == histogramKind && l == "le" {
			panic(fmt.Sprintf("metrics: %s: le is the histogram's own label", name))
		}
		if seen[l] {
			panic(fmt.Sprintf("metrics: %s: label %q twice", name, l))
		}
		seen[l] = true
	}
	d.order = make([]int, len(labels))
	for i := range d.order {
		d.order[i] = i
	}
	sort.SliceStable(d.order, func(i, j int) bool { return labels[d.order[i]] < labels[d.order[j]] })
	for _, i := range d.order {
		d.sorted = append(d.sorted, labels[i])
	}
	return d
}

// sortValues checks label values given in d.labels' order and returns
// them in d.sorted's. A wrong number of values panics, as client_golang's
// WithLabelValues does, and so does a value that is not UTF-8.
func (d *desc) sortValues(values []string) []string {
	if len(values) != len(d.labels) {
		panic(fmt.Sprintf("metrics: %s: %d label values for %d labels %q", d.name, len(values), len(d.labels), d.labels))
	}
	out := make([]string, len(values))
	for i, j := range d.order {
		if !utf8.ValidString(values[j]) {
			panic(fmt.Sprintf("metrics: %s: label value %q is not UTF-8", d.name, values[j]))
		}
		out[i] = values[j]
	}
	return out
}

// register adds f, panicking when its name is taken (a programming error,
// as client_golang's MustRegister).
func (r *Registry) register(f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := f.desc().name
	i, found := slices.BinarySearchFunc(r.fams, name, func(f family, name string) int { return cmp.Compare(f.desc().name, name) })
	if found {
		panic(fmt.Sprintf("metrics: %s registered twice", name))
	}
	r.fams = slices.Insert(r.fams, i, f)
}

// vec is the children of a counter or histogram vector, by label values.
type vec[T any] struct {
	d        *desc
	mu       sync.RWMutex
	children map[string]*child[T]
	newT     func() *T
}

type child[T any] struct {
	values []string // sorted as d.sorted
	m      *T
}

// key identifies label values (given in d.labels' order) unambiguously.
func key(values []string) string {
	var b strings.Builder
	for _, v := range values {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

func (v *vec[T]) with(values []string) *T {
	k := key(values)
	v.mu.RLock()
	c := v.children[k]
	v.mu.RUnlock()
	if c != nil {
		return c.m
	}
	sorted := v.d.sortValues(values)
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.children[k]; c != nil {
		return c.m
	}
	c = &child[T]{values: sorted, m: v.newT()}
	v.children[k] = c
	return c.m
}

func (v *vec[T]) snapshot() []*child[T] {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]*child[T], 0, len(v.children))
	for _, c := range v.children {
		out = append(out, c)
	}
	return out
}

// A CounterVec is a counter family with labels; each label set is a
// Counter of its own.
type CounterVec struct{ v vec[Counter] }

// Counter registers a counter family. Its name should end in _total.
func (r *Registry) Counter(name, help string, labels ...string) *CounterVec {
	cv := &CounterVec{vec[Counter]{d: newDesc(name, help, counterKind, labels), children: map[string]*child[Counter]{}, newT: func() *Counter { return &Counter{} }}}
	r.register(cv)
	return cv
}

// With returns the counter of these label values (in the order the
// family's labels were given), making it at 0 the first time. A wrong
// number of values panics.
func (cv *CounterVec) With(values ...string) *Counter { return cv.v.with(values) }

func (cv *CounterVec) desc() *desc { return cv.v.d }

func (cv *CounterVec) series(*Scrape) []series {
	cs := cv.v.snapshot()
	out := make([]series, len(cs))
	for i, c := range cs {
		out[i] = series{values: c.values, value: c.m.value()}
	}
	return out
}

// A Counter only goes up.
type Counter struct{ bits atomic.Uint64 }

// Inc adds 1.
func (c *Counter) Inc() { c.Add(1) }

// Add adds v, which must not be negative (a counter never decreases;
// client_golang panics likewise).
func (c *Counter) Add(v float64) {
	if v < 0 {
		panic("metrics: a counter cannot decrease")
	}
	for {
		old := c.bits.Load()
		if c.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (c *Counter) value() float64 { return math.Float64frombits(c.bits.Load()) }

// A HistogramVec is a histogram family with labels; each label set is a
// Histogram of its own, with the family's buckets.
type HistogramVec struct{ v vec[Histogram] }

// Histogram registers a histogram family with these bucket upper bounds
// (increasing; the +Inf bucket is implicit, and dropped if given, as
// client_golang does).
func (r *Registry) Histogram(name, help string, buckets []float64, labels ...string) *HistogramVec {
	bounds := slices.Clone(buckets)
	if n := len(bounds); n > 0 && math.IsInf(bounds[n-1], +1) {
		bounds = bounds[:n-1]
	}
	for i, b := range bounds {
		if math.IsNaN(b) || i > 0 && b <= bounds[i-1] {
			panic(fmt.Sprintf("metrics: %s: buckets %v are not increasing", name, buckets))
		}
	}
	d := newDesc(name, help, histogramKind, labels)
	d.bounds = bounds
	hv := &HistogramVec{vec[Histogram]{d: d, children: map[string]*child[Histogram]{},
		newT: func() *Histogram { return &Histogram{bounds: bounds, counts: make([]uint64, len(bounds)+1)} }}}
	r.register(hv)
	return hv
}

// With returns the histogram of these label values (in the order the
// family's labels were given), making it empty the first time. A wrong
// number of values panics.
func (hv *HistogramVec) With(values ...string) *Histogram { return hv.v.with(values) }

func (hv *HistogramVec) desc() *desc { return hv.v.d }

func (hv *HistogramVec) series(*Scrape) []series {
	cs := hv.v.snapshot()
	out := make([]series, len(cs))
	for i, c := range cs {
		out[i] = series{values: c.values, hist: c.m.snapshot()}
	}
	return out
}

// A Histogram counts observations into buckets.
type Histogram struct {
	bounds []float64
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf's
	sum    float64
	count  uint64
}

type histSnapshot struct {
	counts []uint64 // cumulative, one per bound
	sum    float64
	count  uint64
}

// Observe adds one observation: it counts in the first bucket whose
// upper bound is not below v.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.count++
	h.sum += v
	h.mu.Unlock()
}

func (h *Histogram) snapshot() *histSnapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := &histSnapshot{counts: make([]uint64, len(h.bounds)), sum: h.sum, count: h.count}
	var cum uint64
	for i := range h.bounds {
		cum += h.counts[i]
		s.counts[i] = cum
	}
	return s
}

// A GaugeFamily is a gauge family whose values are computed each time the
// registry is written: a function given to Collect sets them.
type GaugeFamily struct{ d *desc }

// GaugeFamily registers a gauge family computed at scrape time.
func (r *Registry) GaugeFamily(name, help string, labels ...string) *GaugeFamily {
	g := &GaugeFamily{newDesc(name, help, gaugeKind, labels)}
	r.register(scraped{g.d})
	return g
}

// scraped is a family whose series a Scrape holds.
type scraped struct{ d *desc }

func (f scraped) desc() *desc               { return f.d }
func (f scraped) series(s *Scrape) []series { return s.series[f.d] }

// scrapedFamily registers a family of kind k computed at scrape time.
func (r *Registry) scrapedFamily(name, help string, k kind, labels ...string) *desc {
	d := newDesc(name, help, k, labels)
	r.register(scraped{d})
	return d
}

// Collect makes f run at each write of the registry, to set the values of
// its gauge families for that write. A family f sets nothing for is not
// written. Writes at the same time each run f with a Scrape of their own.
func (r *Registry) Collect(f func(*Scrape)) {
	r.mu.Lock()
	r.collects = append(r.collects, f)
	r.mu.Unlock()
}

// A Scrape holds the values one write of the registry reports for its
// gauge families.
type Scrape struct {
	series map[*desc][]series
}

// Set reports v for g's sample with these label values (in the order the
// family's labels were given). A wrong number of values panics. Each
// label set should be set once per scrape: twice is a duplicate sample,
// which Check and Prometheus reject.
func (s *Scrape) Set(g *GaugeFamily, v float64, values ...string) { s.set(g.d, v, values...) }

func (s *Scrape) set(d *desc, v float64, values ...string) {
	s.series[d] = append(s.series[d], series{values: d.sortValues(values), value: v})
}

// WriteTo writes every family that has samples in the text exposition
// format: families by name, each one's samples by label values.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	r.write(&b)
	n, err := w.Write(b.Bytes())
	return int64(n), err
}

func (r *Registry) write(b *bytes.Buffer) {
	r.mu.Lock()
	fams := slices.Clone(r.fams)
	collects := slices.Clone(r.collects)
	r.mu.Unlock()
	s := &Scrape{series: map[*desc][]series{}}
	for _, f := range collects {
		f(s)
	}
	for _, f := range fams {
		ss := f.series(s)
		if len(ss) == 0 {
			continue // client_golang writes no family without samples
		}
		slices.SortStableFunc(ss, func(a, b series) int { return slices.Compare(a.values, b.values) })
		writeFamily(b, f.desc(), ss)
	}
}

// Handler serves the registry's text: GET /metrics. It compresses with
// gzip when the request accepts it, as client_golang's handler did.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b bytes.Buffer
		r.write(&b)
		h := w.Header()
		h.Set("Content-Type", ContentType)
		h.Add("Vary", "Accept-Encoding")
		if !acceptsGzip(req.Header.Get("Accept-Encoding")) {
			w.Write(b.Bytes())
			return
		}
		h.Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		gz.Write(b.Bytes())
		gz.Close()
	})
}

// acceptsGzip reports whether an Accept-Encoding value lists gzip with a
// quality above 0.
func acceptsGzip(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.TrimSpace(params), "q=")
		if !ok {
			return true
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(q), 64)
		return err == nil && f > 0
	}
	return false
}
