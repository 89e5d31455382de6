// Command promlint checks exposition text on stdin with client_golang's
// own tools: its linter (prometheus/testutil/promlint) and
// prometheus/common's text parser, and that the text is byte for byte
// what client_golang writes for the metrics it holds (the parsed
// families gathered through a client_golang registry, which sorts them,
// and encoded with expfmt). It prints every problem and exits 1 on any.
// corral's TestPromlint (internal/metrics) runs it in CI's full run; it
// is a module of its own so that corral's go.mod does not depend on
// client_golang.
package main

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bad := false
	problem := func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
		bad = true
	}

	problems, err := promlint.New(bytes.NewReader(in)).Lint()
	if err != nil {
		problem("promlint: %v", err)
	}
	for _, p := range problems {
		problem("promlint: %s: %s", p.Metric, p.Text)
	}

	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(in))
	if err != nil {
		problem("expfmt parser: %v", err)
	} else {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(replay(fams))
		mfs, err := reg.Gather()
		if err != nil {
			problem("gather the parsed families: %v", err)
		}
		var out bytes.Buffer
		for _, mf := range mfs {
			if _, err := expfmt.MetricFamilyToText(&out, mf); err != nil {
				problem("expfmt: %v", err)
			}
		}
		if !bytes.Equal(out.Bytes(), in) {
			problem("client_golang writes these metrics otherwise:\n%s", diff(in, out.Bytes()))
		}
	}
	if bad {
		os.Exit(1)
	}
	fmt.Println("ok")
}

// replay is a collector of the parsed families' samples as const metrics.
type replay map[string]*dto.MetricFamily

func (r replay) Describe(ch chan<- *prometheus.Desc) {
	for _, mf := range r {
		ch <- desc(mf)
	}
}

func desc(mf *dto.MetricFamily) *prometheus.Desc {
	var labels []string
	if len(mf.Metric) > 0 {
		for _, lp := range mf.Metric[0].Label {
			labels = append(labels, lp.GetName())
		}
	}
	return prometheus.NewDesc(mf.GetName(), mf.GetHelp(), labels, nil)
}

func (r replay) Collect(ch chan<- prometheus.Metric) {
	for _, mf := range r {
		d := desc(mf)
		for _, m := range mf.Metric {
			var values []string
			for _, lp := range m.Label {
				values = append(values, lp.GetValue())
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, m.Counter.GetValue(), values...)
			case dto.MetricType_GAUGE:
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, m.Gauge.GetValue(), values...)
			case dto.MetricType_HISTOGRAM:
				buckets := map[float64]uint64{}
				for _, b := range m.Histogram.Bucket {
					if !math.IsInf(b.GetUpperBound(), +1) {
						buckets[b.GetUpperBound()] = b.GetCumulativeCount()
					}
				}
				ch <- prometheus.MustNewConstHistogram(d, m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum(), buckets, values...)
			default:
				ch <- prometheus.NewInvalidMetric(d, fmt.Errorf("%s: type %s", mf.GetName(), mf.GetType()))
			}
		}
	}
}

// diff is the first differing line of got (the input) and want
// (client_golang's), with its number.
func diff(got, want []byte) string {
	g, w := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range max(len(g), len(w)) {
		var gl, wl []byte
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if !slices.Equal(gl, wl) {
			return fmt.Sprintf("line %d:\n  input:         %q\n  client_golang: %q", i+1, gl, wl)
		}
	}
	return "(they differ in their end)"
}
