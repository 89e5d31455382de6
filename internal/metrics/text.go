package metrics

import (
	"bytes"
	"math"
	"strconv"
)

// This file writes the text exposition format as client_golang's
// encoder (prometheus/common's expfmt, text_create.go) does.

// writeFamily writes d's HELP and TYPE lines and the samples of ss.
func writeFamily(b *bytes.Buffer, d *desc, ss []series) {
	b.WriteString("# HELP ")
	b.WriteString(d.name)
	b.WriteByte(' ')
	writeEscaped(b, d.help, false)
	b.WriteString("\n# TYPE ")
	b.WriteString(d.name)
	b.WriteByte(' ')
	b.WriteString(d.kind.String())
	b.WriteByte('\n')
	for _, s := range ss {
		if s.hist == nil {
			writeSample(b, d.name, "", d.sorted, s.values, false, 0, s.value)
			continue
		}
		for i, bound := range d.bounds {
			writeSample(b, d.name, "_bucket", d.sorted, s.values, true, bound, float64(s.hist.counts[i]))
		}
		writeSample(b, d.name, "_bucket", d.sorted, s.values, true, math.Inf(+1), float64(s.hist.count))
		writeSample(b, d.name, "_sum", d.sorted, s.values, false, 0, s.hist.sum)
		writeSample(b, d.name, "_count", d.sorted, s.values, false, 0, float64(s.hist.count))
	}
}

// writeSample writes one sample line; with le, the bucket's label comes
// last.
func writeSample(b *bytes.Buffer, name, suffix string, labels, values []string, le bool, bound, v float64) {
	b.WriteString(name)
	b.WriteString(suffix)
	if len(labels) > 0 || le {
		sep := byte('{')
		for i, l := range labels {
			b.WriteByte(sep)
			b.WriteString(l)
			b.WriteString(`="`)
			writeEscaped(b, values[i], true)
			b.WriteByte('"')
			sep = ','
		}
		if le {
			b.WriteByte(sep)
			b.WriteString(`le="`)
			b.WriteString(formatFloat(bound))
			b.WriteByte('"')
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatFloat(v))
	b.WriteByte('\n')
}

// writeEscaped writes s with backslash and newline escaped, and the
// double quote too in a label value.
func writeEscaped(b *bytes.Buffer, s string, quote bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '"' && quote:
			b.WriteString(`\"`)
		default:
			b.WriteByte(c)
		}
	}
}

// formatFloat is a value as the format writes it: Go's shortest 'g' form,
// but +Inf, -Inf and NaN, and 0 for a negative zero.
func formatFloat(f float64) string {
	switch {
	case f == 0:
		return "0"
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// validMetricName: [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool { return validName(s, true) }

// validLabelName: [a-zA-Z_][a-zA-Z0-9_]*.
func validLabelName(s string) bool { return validName(s, false) }

func validName(s string, colon bool) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || colon && c == ':' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return false
		}
	}
	return true
}
