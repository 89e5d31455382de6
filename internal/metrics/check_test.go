package metrics

import (
	"strings"
	"testing"
)

// Check accepts what the format allows and this package writes, and
// refuses each way of breaking it, naming the line.
func TestCheck(t *testing.T) {
	const (
		counter = "# HELP a_total A.\n# TYPE a_total counter\n"
		gauge   = "# HELP g G.\n# TYPE g gauge\n"
		hist    = "# HELP h H.\n# TYPE h histogram\n"
	)
	series := func(labels string, b1, inf, sum, count string) string {
		sep := ""
		if labels != "" {
			sep = ","
		}
		l := ""
		if labels != "" {
			l = "{" + labels + "}"
		}
		return "h_bucket{" + labels + sep + `le="1"} ` + b1 + "\n" +
			"h_bucket{" + labels + sep + `le="+Inf"} ` + inf + "\n" +
			"h_sum" + l + " " + sum + "\n" + "h_count" + l + " " + count + "\n"
	}
	for _, tc := range []struct {
		name, text string
		err        string // "" when valid
	}{
		{"empty", "", ""},
		{"counter", counter + "a_total 1\n", ""},
		{"gauge with labels", gauge + `g{a="x",b="y \"q\" \\ \n"} -1.5` + "\n" + `g{a="x",b="z"} NaN` + "\n", ""},
		{"two families", counter + "a_total 0\n" + gauge + "g +Inf\n", ""},
		{"histogram", hist + series(`op="a"`, "1", "2", "3.5", "2") + series(`op="b"`, "0", "0", "0", "0"), ""},
		{"histogram without labels", hist + series("", "1", "1", "0.5", "1"), ""},

		{"no final newline", counter + "a_total 1", "newline"},
		{"not UTF-8", gauge + "g{a=\"\xff\"} 1\n", "UTF-8"},
		{"blank line", counter + "\na_total 1\n", "neither"},
		{"other comment", "# hello\n" + counter + "a_total 1\n", "neither"},
		{"no HELP", "# TYPE a_total counter\na_total 1\n", "TYPE of a_total not right after its HELP"},
		{"empty HELP", "# HELP a_total \n# TYPE a_total counter\na_total 1\n", "HELP without a text"},
		{"no TYPE", "# HELP a_total A.\na_total 1\n", "before its family's HELP and TYPE"},
		{"TYPE of another", "# HELP a_total A.\n# TYPE b_total counter\nb_total 1\n", "not right after"},
		{"bad TYPE", "# HELP a_total A.\n# TYPE a_total countr\na_total 1\n", "want counter, gauge or histogram"},
		{"summary", "# HELP a A.\n# TYPE a summary\na_sum 1\n", "want counter, gauge or histogram"},
		{"counter without _total", "# HELP a A.\n# TYPE a counter\na 1\n", "counters, and only counters"},
		{"gauge with _total", "# HELP a_total A.\n# TYPE a_total gauge\na_total 1\n", "counters, and only counters"},
		{"negative counter", counter + "a_total -1\n", "counter value"},
		{"NaN counter", counter + "a_total NaN\n", "counter value"},
		{"family without samples", counter + gauge + "g 1\n", "a_total has no samples"},
		{"last family without samples", counter, "a_total has no samples"},
		{"families out of order", gauge + "g 1\n" + counter + "a_total 1\n", "in order of name"},
		{"family twice", gauge + "g 1\n" + gauge + "g 2\n", "in order of name"},
		{"HELP escape", "# HELP g a \\t b\n# TYPE g gauge\ng 1\n", `escape \t`},
		{"invalid metric name", "# HELP 1g G.\n# TYPE 1g gauge\n1g 1\n", "invalid metric name"},
		{"sample of another family", gauge + "h 1\n", "sample h in family g"},
		{"invalid label name", gauge + `g{a-b="x"} 1` + "\n", "invalid label name"},
		{"reserved label name", gauge + `g{__a="x"} 1` + "\n", "invalid label name"},
		{"labels out of order", gauge + `g{b="x",a="y"} 1` + "\n", "in order of name"},
		{"label twice", gauge + `g{a="x",a="y"} 1` + "\n", "in order of name"},
		{"unescaped quote", gauge + `g{a="x"y"} 1` + "\n", "want , or }"},
		{"bad escape", gauge + `g{a="x\ty"} 1` + "\n", `escape \t`},
		{"no closing quote", gauge + `g{a="x} 1` + "\n", "no closing quote"},
		{"empty braces", gauge + "g{} 1\n", "want name="},
		{"two spaces", gauge + "g  1\n", "not a number"},
		{"timestamp", gauge + "g 1 1700000000000\n", "not a number"},
		{"no value", gauge + "g\n", "without a value"},
		{"Inf spelled otherwise", gauge + "g Inf\n", "not a number"},
		{"NaN spelled otherwise", gauge + "g nan\n", "not a number"},
		{"value not as written", gauge + "g 1.0\n", `written 1`},
		{"exponent not as written", gauge + "g 1e21\n", `written 1e+21`},
		{"samples out of order", gauge + `g{a="y"} 1` + "\n" + `g{a="x"} 1` + "\n", "in order of label values"},
		{"sample twice", gauge + "g 1\ng 2\n", "in order of label values"},
		{"other labels in one family", gauge + `g{a="x"} 1` + "\n" + `g{b="y"} 1` + "\n", "in one family"},
		{"le outside a histogram", gauge + `g{le="1"} 1` + "\n", "le outside a bucket"},
		{"histogram without +Inf", hist + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "before the series' le=\"+Inf\" bucket"},
		{"histogram ends early", hist + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n", "before its series' _count"},
		{"buckets not cumulative", hist + series("", "2", "1", "1", "1"), "buckets are cumulative"},
		{"buckets out of order", hist + "h_bucket{le=\"1\"} 0\nh_bucket{le=\"0.5\"} 0\nh_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n", "increasing order"},
		{"count not the +Inf bucket", hist + series("", "1", "2", "1", "3"), "+Inf bucket says 2"},
		{"count before sum", hist + "h_bucket{le=\"+Inf\"} 0\nh_count 0\nh_sum 0\n", "_sum was due"},
		{"le not last", hist + `h_bucket{le="+Inf",op="a"} 0` + "\n", "without le as its last label"},
		{"le not a number", hist + `h_bucket{le="x"} 0` + "\n", "le:"},
		{"histogram series out of order", hist + series(`op="b"`, "0", "0", "0", "0") + series(`op="a"`, "0", "0", "0", "0"), "in order of label values"},
		{"other sample in a histogram", hist + "h_total 1\n", "before the series' le"},
		{"gauge sample in a histogram", hist + "h 1\n", "sample h in histogram h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.text)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Check: %v\n%s", err, tc.text)
			case tc.err != "" && err == nil:
				t.Errorf("Check accepted it, want an error with %q\n%s", tc.err, tc.text)
			case tc.err != "" && !strings.Contains(err.Error(), tc.err):
				t.Errorf("Check: %v, want an error with %q", err, tc.err)
			}
		})
	}
}

// Parse returns each sample's name, labels (le included) and value.
func TestParse(t *testing.T) {
	samples, err := Parse("# HELP h H.\n# TYPE h histogram\n" + `h_bucket{op="a \"b\"",le="+Inf"} 2` + "\n" +
		`h_sum{op="a \"b\""} 0.25` + "\n" + `h_count{op="a \"b\""} 2` + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 3 || samples[0].Name != "h_bucket" || samples[0].Labels["le"] != "+Inf" || samples[0].Labels["op"] != `a "b"` ||
		samples[1].Name != "h_sum" || samples[1].Value != 0.25 || samples[2].Value != 2 {
		t.Errorf("Parse = %+v", samples)
	}
}
