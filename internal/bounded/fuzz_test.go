package bounded_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/bounded"
	"github.com/corralhq/corral/internal/testutil/memcap"
)

// FuzzJSON: JSON never panics, and what it passes, encoding/json decodes
// to a value no deeper and with no more values than the limits say,
// within the memory cap.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"data":{"a":[1,2,{"b":"c"}]}}`, `"[[[["`, `["\\",[[[[]]]]]`, `["\"[[[["]`,
		strings.Repeat("[", 20) + strings.Repeat("]", 20), strings.Repeat("{\"a\":", 20) + "1" + strings.Repeat("}", 20),
		"[" + strings.Repeat("0,", 2000) + "0]", `{"a":1,"a":2}`, "\xff[", `"\u005b"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l := bounded.Limits{Size: 1 << 20, Depth: 8, Values: 1000}
		var err error
		memcap.Run(t, 8*uint64(len(data))+1<<20, len(data), func() { err = bounded.JSON(data, l) })
		if err != nil || !json.Valid(data) {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // 1e400 is valid JSON but no float64
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("valid JSON did not decode: %v", err)
		}
		depth, values := shape(v)
		if depth > l.Depth || values > l.Values {
			t.Fatalf("passed with depth %d and %d values, limits %+v", depth, values, l)
		}
	})
}

// shape is the nesting depth and the number of containers and elements
// of v (a container counts as a value, as in JSON's count).
func shape(v any) (depth, values int) {
	switch v := v.(type) {
	case []any:
		d := 0
		values = 1 + max(len(v)-1, 0)
		for _, e := range v {
			ed, ev := shape(e)
			d, values = max(d, ed), values+ev
		}
		return d + 1, values
	case map[string]any:
		d := 0
		values = 1 + max(len(v)-1, 0)
		for _, e := range v {
			ed, ev := shape(e)
			d, values = max(d, ed), values+ev
		}
		return d + 1, values
	}
	return 0, 0
}
