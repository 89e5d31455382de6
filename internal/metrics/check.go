package metrics

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A Sample is one sample line of exposition text.
type Sample struct {
	Name   string            // with _bucket, _sum or _count for a histogram's
	Labels map[string]string // a bucket's le included
	Value  float64
}

// Check validates exposition text by the rules of the format and of what
// this package (and client_golang) writes; see Parse.
func Check(text string) error {
	_, err := Parse(text)
	return err
}

// Parse reads exposition text and returns its samples in order, checking
// every line: each family is a "# HELP name text" line, then its
// "# TYPE name counter|gauge|histogram" line, then at least one sample;
// families in order of name, each once; metric and label names valid
// ([a-zA-Z_:][a-zA-Z0-9_:]* and [a-zA-Z_][a-zA-Z0-9_]*), labels in order
// of name, values escaped (\\, \", \n only) and written as formatFloat
// does; counters named *_total (and nothing else so), their values not
// negative; samples in order of their label values, no label set twice;
// a histogram's series its buckets with increasing le, cumulative,
// ending with le="+Inf", then _sum, then _count equal to the +Inf
// bucket (le, last, in buckets only). Nothing else: no other comments,
// blank lines or timestamps.
func Parse(text string) ([]Sample, error) {
	p := &parser{}
	if text == "" {
		return nil, nil
	}
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the text does not end in a newline")
	}
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("the text is not UTF-8")
	}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", i+1, err, line)
		}
	}
	if err := p.endFamily(); err != nil {
		return nil, fmt.Errorf("at the end: %w", err)
	}
	return p.samples, nil
}

type parser struct {
	samples []Sample

	fam     string // the current family's name ("" before the first)
	typ     string // its TYPE ("" right after its HELP)
	nseries int    // its series so far
	names   []string
	prev    []string // the label values of its previous series

	// the histogram series under way: its next line is "bucket" (le
	// after last), "sum" or "count"
	hnext   string
	hvalues []string
	hlast   float64 // the last bucket's le
	hcum    float64 // and its value
	hcount  float64
}

func (p *parser) line(line string) error {
	if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
		name, help, ok := strings.Cut(rest, " ")
		if !ok || help == "" {
			return fmt.Errorf("HELP without a text")
		}
		if err := p.endFamily(); err != nil {
			return err
		}
		if !validMetricName(name) {
			return fmt.Errorf("invalid metric name %q", name)
		}
		if name <= p.fam {
			return fmt.Errorf("family %s after %s: families are in order of name, each once", name, p.fam)
		}
		if _, err := unescape(help, false); err != nil {
			return fmt.Errorf("HELP: %w", err)
		}
		*p = parser{samples: p.samples, fam: name}
		return nil
	}
	if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
		name, typ, _ := strings.Cut(rest, " ")
		if p.fam == "" || name != p.fam || p.typ != "" {
			return fmt.Errorf("TYPE of %s not right after its HELP", name)
		}
		switch typ {
		case "counter", "gauge", "histogram":
		default:
			return fmt.Errorf("type %q: want counter, gauge or histogram", typ)
		}
		if counter := typ == "counter"; counter != strings.HasSuffix(name, "_total") {
			return fmt.Errorf("%s is a %s: counters, and only counters, are named *_total", name, typ)
		}
		p.typ = typ
		return nil
	}
	if strings.HasPrefix(line, "#") || line == "" {
		return fmt.Errorf("a line that is neither HELP, TYPE nor a sample")
	}
	if p.typ == "" {
		return fmt.Errorf("a sample before its family's HELP and TYPE")
	}
	s, names, values, err := parseSample(line)
	if err != nil {
		return err
	}
	p.samples = append(p.samples, s)
	if p.typ != "histogram" {
		if s.Name != p.fam {
			return fmt.Errorf("sample %s in family %s", s.Name, p.fam)
		}
		if slices.Contains(names, "le") {
			return fmt.Errorf("le outside a bucket")
		}
		if p.typ == "counter" && !(s.Value >= 0) {
			return fmt.Errorf("counter value %v", s.Value)
		}
		return p.series(names, values)
	}
	suffix, ok := strings.CutPrefix(s.Name, p.fam+"_")
	if !ok {
		return fmt.Errorf("sample %s in histogram %s", s.Name, p.fam)
	}
	if suffix == "bucket" {
		if len(names) == 0 || names[len(names)-1] != "le" {
			return fmt.Errorf("a bucket without le as its last label")
		}
		le := values[len(values)-1]
		names, values = names[:len(names)-1], values[:len(values)-1]
		bound, err := parseFloat(le)
		if err != nil {
			return fmt.Errorf("le: %w", err)
		}
		if p.hnext == "" {
			if err := p.series(names, values); err != nil {
				return err
			}
			p.hnext, p.hvalues, p.hlast, p.hcum = "bucket", values, math.Inf(-1), 0
		}
		switch {
		case p.hnext != "bucket" || !slices.Equal(values, p.hvalues):
			return fmt.Errorf("a bucket where %s's _%s was due", p.fam, p.hnext)
		case !(bound > p.hlast):
			return fmt.Errorf("le %s after %s: buckets are in increasing order", le, formatFloat(p.hlast))
		case !(s.Value >= p.hcum):
			return fmt.Errorf("bucket %s below the one before (%s): buckets are cumulative", formatFloat(s.Value), formatFloat(p.hcum))
		}
		p.hlast, p.hcum = bound, s.Value
		if math.IsInf(bound, +1) {
			p.hnext = "sum"
		}
		return nil
	}
	if slices.Contains(names, "le") {
		return fmt.Errorf("le outside a bucket")
	}
	switch {
	case p.hnext == "bucket" || p.hnext == "":
		return fmt.Errorf("_%s before the series' le=\"+Inf\" bucket", suffix)
	case suffix != p.hnext || !slices.Equal(values, p.hvalues):
		return fmt.Errorf("%s where %s's _%s was due", s.Name, p.fam, p.hnext)
	case suffix == "sum":
		p.hnext = "count"
	case s.Value != p.hcum:
		return fmt.Errorf("_count %s, but the +Inf bucket says %s", formatFloat(s.Value), formatFloat(p.hcum))
	default:
		p.hnext = ""
	}
	return nil
}

// series checks the label names and values of a family's next series.
func (p *parser) series(names, values []string) error {
	if p.nseries > 0 {
		if !slices.Equal(names, p.names) {
			return fmt.Errorf("labels %q after %q in one family", names, p.names)
		}
		if slices.Compare(values, p.prev) <= 0 {
			return fmt.Errorf("label values %q after %q: samples are in order of label values, each once", values, p.prev)
		}
	}
	p.nseries++
	p.names, p.prev = names, values
	return nil
}

func (p *parser) endFamily() error {
	switch {
	case p.fam == "":
		return nil
	case p.typ == "":
		return fmt.Errorf("family %s has no TYPE", p.fam)
	case p.nseries == 0:
		return fmt.Errorf("family %s has no samples", p.fam)
	case p.hnext != "":
		return fmt.Errorf("histogram %s ends before its series' _%s", p.fam, p.hnext)
	}
	return nil
}

// parseSample reads name{label="value",...} value.
func parseSample(line string) (s Sample, names, values []string, err error) {
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, nil, nil, fmt.Errorf("a sample without a value")
	}
	s.Name = line[:i]
	if !validMetricName(s.Name) {
		return s, nil, nil, fmt.Errorf("invalid metric name %q", s.Name)
	}
	rest := line[i:]
	s.Labels = map[string]string{}
	if rest[0] == '{' {
		rest = rest[1:]
		for {
			name, after, ok := strings.Cut(rest, `="`)
			if !ok {
				return s, nil, nil, fmt.Errorf("labels: want name=\"value\"")
			}
			if !validLabelName(name) || strings.HasPrefix(name, "__") {
				return s, nil, nil, fmt.Errorf("invalid label name %q", name)
			}
			if n := len(names); n > 0 && name <= names[n-1] && name != "le" {
				return s, nil, nil, fmt.Errorf("label %s after %s: labels are in order of name, each once", name, names[n-1])
			}
			if _, dup := s.Labels[name]; dup {
				return s, nil, nil, fmt.Errorf("label %s twice", name)
			}
			end := closingQuote(after)
			if end < 0 {
				return s, nil, nil, fmt.Errorf("label %s: no closing quote", name)
			}
			v, err := unescape(after[:end], true)
			if err != nil {
				return s, nil, nil, fmt.Errorf("label %s: %w", name, err)
			}
			names, values = append(names, name), append(values, v)
			s.Labels[name] = v
			rest = after[end+1:]
			if r, ok := strings.CutPrefix(rest, ","); ok {
				rest = r
				continue
			}
			if r, ok := strings.CutPrefix(rest, "}"); ok {
				rest = r
				break
			}
			return s, nil, nil, fmt.Errorf("labels: want , or } after %s", name)
		}
	}
	v, ok := strings.CutPrefix(rest, " ")
	if !ok {
		return s, nil, nil, fmt.Errorf("want one space before the value")
	}
	if s.Value, err = parseFloat(v); err != nil {
		return s, nil, nil, err
	}
	return s, names, values, nil
}

// closingQuote is the index of the first unescaped '"' in s, or -1.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescape undoes writeEscaped, refusing any other escape (and a bare
// double quote in a label value).
func unescape(s string, quote bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' && quote {
			return "", fmt.Errorf("an unescaped double quote")
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i++; i == len(s) {
			return "", fmt.Errorf("a backslash at the end")
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quote {
				return "", fmt.Errorf(`an escaped double quote (\") outside a label value`)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("the escape \\%c", s[i])
		}
	}
	return b.String(), nil
}

// parseFloat reads a value written as formatFloat writes it, and only so.
func parseFloat(s string) (float64, error) {
	var f float64
	switch s {
	case "NaN":
		f = math.NaN()
	case "+Inf":
		f = math.Inf(+1)
	case "-Inf":
		f = math.Inf(-1)
	default:
		var err error
		if f, err = strconv.ParseFloat(s, 64); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, fmt.Errorf("value %q is not a number", s)
		}
	}
	if formatFloat(f) != s {
		return 0, fmt.Errorf("value %q is written %s in the format", s, formatFloat(f))
	}
	return f, nil
}
