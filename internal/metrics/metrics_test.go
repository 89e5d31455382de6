package metrics

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// goldenRegistry has a family of every kind, labels given out of order,
// label values and help texts that need escapes, the special values, and
// families without samples (which are not written).
func goldenRegistry() *Registry {
	r := NewRegistry()
	req := r.Counter("corral_test_requests_total", "Requests by method and code.\nA second line, a \\ and a \"quote\".", "method", "code")
	req.With("GET", "200").Add(3)
	req.With("GET", "500").Inc()
	req.With(`PO"ST`, "200").Add(0.5)
	req.With("a\\b\nc", "404").Add(1e21)
	req.With("GET", "200").Inc()
	events := r.Counter("corral_test_events_total", "Events.")
	events.With().Add(0)
	r.Counter("corral_test_unused_total", "Never incremented: not written.", "x")

	dur := r.Histogram("corral_test_duration_seconds", "Durations by operation.", []float64{0.05, 0.1, 1, 2.5, math.Inf(+1)}, "op")
	for _, v := range []float64{0.05, 0.01, 0.2, 1, 3, 0.075} {
		dur.With("observe").Observe(v)
	}
	dur.With("nan").Observe(math.NaN())
	dur.With("inf").Observe(math.Inf(+1))
	dur.With("zero") // a series without observations
	r.Histogram("corral_test_unused_seconds", "Never observed: not written.", []float64{1})

	temp := r.GaugeFamily("corral_test_temperature", "Gauges with two labels, given out of order.", "zone", "app")
	up := r.GaugeFamily("corral_test_up", "A gauge without labels.")
	r.GaugeFamily("corral_test_unset", "Never set: not written.", "app")
	r.Collect(func(s *Scrape) {
		s.Set(up, 1)
		for i, v := range []float64{math.Copysign(0, -1), -1, 1, 0.5, 1e-7, math.NaN(), math.Inf(+1), math.Inf(-1), 123456789012, 1.5e300} {
			s.Set(temp, v, fmt.Sprint(i%2), fmt.Sprintf("app-%d \"q\" \\ \n", i))
		}
	})
	return r
}

func text(t testing.TB, r *Registry) string {
	t.Helper()
	var b strings.Builder
	if _, err := r.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The golden registry's text is what client_golang's encoder wrote for
// the same metrics (TestPromlint checks it against client_golang again
// in CI's full run), and it passes Check.
func TestWriteTo_golden(t *testing.T) {
	got := text(t, goldenRegistry())
	testenv.Golden(t, filepath.Join("testdata", "registry.txt"), []byte(got))
	if err := Check(got); err != nil {
		t.Errorf("Check: %v\n%s", err, got)
	}
	for _, absent := range []string{"unused", "unset"} {
		if strings.Contains(got, absent) {
			t.Errorf("a family without samples was written (%s):\n%s", absent, got)
		}
	}
	if got := text(t, NewRegistry()); got != "" {
		t.Errorf("an empty registry wrote %q", got)
	}
}

func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {math.Copysign(0, -1), "0"}, {1, "1"}, {-1, "-1"}, {0.5, "0.5"}, {0.05, "0.05"},
		{1e-7, "1e-07"}, {123456789012, "1.23456789012e+11"}, {1e21, "1e+21"}, {2.5, "2.5"}, {1800, "1800"},
		{math.NaN(), "NaN"}, {math.Inf(+1), "+Inf"}, {math.Inf(-1), "-Inf"},
		{18446744073709551615, "1.8446744073709552e+19"},
	} {
		if got := formatFloat(tc.v); got != tc.want {
			t.Errorf("formatFloat(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestWriteEscaped(t *testing.T) {
	for _, tc := range []struct {
		in          string
		quote       bool
		want        string
		unescapable bool // unescape gives in back
	}{
		{`plain`, false, `plain`, true},
		{"a\\b", false, `a\\b`, true},
		{"a\nb", false, `a\nb`, true},
		{`say "hi"`, false, `say "hi"`, true}, // HELP leaves quotes alone
		{`say "hi"`, true, `say \"hi\"`, true},
		{"\\\"\n", true, `\\\"\n`, true},
		{"tab\there é", true, "tab\there é", true},
	} {
		var b bytes.Buffer
		writeEscaped(&b, tc.in, tc.quote)
		if b.String() != tc.want {
			t.Errorf("writeEscaped(%q, %v) = %q, want %q", tc.in, tc.quote, b.String(), tc.want)
		}
		if back, err := unescape(b.String(), tc.quote); err != nil || back != tc.in {
			t.Errorf("unescape(%q) = %q, %v", b.String(), back, err)
		}
	}
}

// Families are written by name and samples by their label values (in the
// order of the label names), whatever the order of registration and use.
func TestWriteTo_sorts(t *testing.T) {
	r := NewRegistry()
	b := r.Counter("b_total", "B.", "y", "x")
	a := r.Counter("a_total", "A.")
	a.With().Inc()
	for _, v := range [][2]string{{"2", "b"}, {"1", "b"}, {"1", "a"}, {"10", "a"}, {"", "a"}} {
		b.With(v[0], v[1]).Inc()
	}
	want := `# HELP a_total A.
# TYPE a_total counter
a_total 1
# HELP b_total B.
# TYPE b_total counter
b_total{x="a",y=""} 1
b_total{x="a",y="1"} 1
b_total{x="a",y="10"} 1
b_total{x="b",y="1"} 1
b_total{x="b",y="2"} 1
`
	if got := text(t, r); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// Wrong use panics, as client_golang's Must* functions and
// WithLabelValues do.
func TestPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(r *Registry)
	}{
		{"too few label values", func(r *Registry) { r.Counter("a_total", "A.", "x", "y").With("1") }},
		{"too many label values", func(r *Registry) { r.Histogram("h", "H.", []float64{1}, "x").With("1", "2") }},
		{"values without labels", func(r *Registry) { r.Counter("a_total", "A.").With("1") }},
		{"gauge label values", func(r *Registry) {
			g := r.GaugeFamily("g", "G.", "x")
			r.Collect(func(s *Scrape) { s.Set(g, 1) })
			r.WriteTo(io.Discard)
		}},
		{"label value not UTF-8", func(r *Registry) { r.Counter("a_total", "A.", "x").With("\xff") }},
		{"negative add", func(r *Registry) { r.Counter("a_total", "A.").With().Add(-1) }},
		{"registered twice", func(r *Registry) { r.Counter("a_total", "A."); r.GaugeFamily("a_total", "A.") }},
		{"invalid name", func(r *Registry) { r.Counter("a-b_total", "A.") }},
		{"invalid label", func(r *Registry) { r.Counter("a_total", "A.", "1x") }},
		{"reserved label", func(r *Registry) { r.Counter("a_total", "A.", "__x") }},
		{"label twice", func(r *Registry) { r.Counter("a_total", "A.", "x", "x") }},
		{"le in a histogram", func(r *Registry) { r.Histogram("h", "H.", []float64{1}, "le") }},
		{"buckets not increasing", func(r *Registry) { r.Histogram("h", "H.", []float64{1, 1}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			tc.f(NewRegistry())
		})
	}
}

// Many goroutines count at once, with scrapes between them: under -race
// no race, and the totals exact.
func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("c_total", "C.", "k")
	h := r.Histogram("h_seconds", "H.", []float64{1, 2}, "k")
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	stop := make(chan struct{})
	scraped := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				scraped <- nil
				return
			default:
			}
			if err := Check(text(t, r)); err != nil {
				scraped <- err
				return
			}
		}
	}()
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprint(g % 3)
			for i := range each {
				c.With(k).Inc()
				c.With("all").Add(0.5)
				h.With("all").Observe(float64(i % 3))
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-scraped; err != nil {
		t.Errorf("a scrape during the updates: %v", err)
	}
	samples, err := Parse(text(t, r))
	if err != nil {
		t.Fatal(err)
	}
	var sum, le1 float64
	for i := range each {
		sum += float64(i % 3)
		if i%3 <= 1 {
			le1++
		}
	}
	want := map[string]float64{
		`c_total{all}`: goroutines * each / 2, `c_total{0}`: 3 * each, `c_total{1}`: 3 * each, `c_total{2}`: 2 * each,
		`h_seconds_count{all}`: goroutines * each, `h_seconds_sum{all}`: goroutines * sum,
		`h_seconds_bucket{all,1}`: goroutines * le1, `h_seconds_bucket{all,2}`: goroutines * each, `h_seconds_bucket{all,+Inf}`: goroutines * each,
	}
	got := map[string]float64{}
	for _, s := range samples {
		k := s.Name + "{" + s.Labels["k"]
		if le, ok := s.Labels["le"]; ok {
			k += "," + le
		}
		got[k+"}"] = s.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// Two scrapes at once each get their own collection: the gauges one
// write reports all come from the same call of the collect function.
func TestConcurrentScrapes(t *testing.T) {
	r := NewRegistry()
	a := r.GaugeFamily("a", "A.", "i")
	b := r.GaugeFamily("b", "B.", "i")
	var mu sync.Mutex
	n := 0
	r.Collect(func(s *Scrape) {
		mu.Lock()
		n++
		v := float64(n)
		mu.Unlock()
		for i := range 5 {
			s.Set(a, v, fmt.Sprint(i))
			runtime.Gosched()
			s.Set(b, v, fmt.Sprint(i))
		}
	})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				out := text(t, r)
				samples, err := Parse(out)
				if err != nil {
					t.Error(err)
					return
				}
				if len(samples) != 10 {
					t.Errorf("%d samples, want 10:\n%s", len(samples), out)
					return
				}
				for _, s := range samples {
					if s.Value != samples[0].Value {
						t.Errorf("one scrape mixes values of two collections:\n%s", out)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// The handler serves the text with the format's content type, gzipped
// when the client accepts it.
func TestHandler(t *testing.T) {
	r := goldenRegistry()
	want := text(t, r)
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, tc := range []struct {
		accept string
		gzip   bool
	}{
		{"", false}, {"gzip", true}, {"br, gzip;q=0.5", true}, {"gzip;q=0", false}, {"identity", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		if tc.accept != "" {
			req.Header.Set("Accept-Encoding", tc.accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body io.Reader = resp.Body
		if got := resp.Header.Get("Content-Encoding") == "gzip"; got != tc.gzip {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", tc.accept, got, tc.gzip)
		} else if got {
			if body, err = gzip.NewReader(resp.Body); err != nil {
				t.Fatal(err)
			}
		}
		b, err := io.ReadAll(body)
		resp.Body.Close()
		if err != nil || string(b) != want || resp.StatusCode != 200 {
			t.Errorf("Accept-Encoding %q: %d %v\n%s", tc.accept, resp.StatusCode, err, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
			t.Errorf("Content-Type %q", ct)
		}
	}
}
