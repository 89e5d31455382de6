package manifest_test

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

const boundsHead = "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    tags: "

// Issue 27, item 1: inputs far under the 4 MiB manifest limit that made
// yaml.v3 allocate gigabytes (nested flow sequences grow with the square
// of the depth) are refused by the scan of the raw bytes, with the line,
// the limit and little memory. Before, 60,000 levels took 5.5 GB and
// 200,000 ran out of memory.
func TestParse_boundedInput(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"nested flow sequences", boundsHead + strings.Repeat("[", 200_000) + strings.Repeat("]", 200_000) + "\n", "nested more than 64 levels"},
		{"nested flow mappings", boundsHead + strings.Repeat("{a: ", 100_000) + "b" + strings.Repeat("}", 100_000) + "\n", "nested more than 64 levels"},
		{"stacked block sequences", boundsHead + "\n" + strings.Repeat("- ", 500_000) + "x\n", "nested more than 64 levels"},
		{"deep indentation", boundsHead + "\n" + strings.Repeat(" ", 300) + "- x\n", "nested more than 64 levels"},
		{"brackets closed early cannot buy depth", boundsHead + strings.Repeat("]", 1000) + strings.Repeat("[", 100) + "\n", "nested more than 64 levels"},
		{"a million values", boundsHead + "[" + strings.Repeat("a, ", 1_000_000) + "a]\n", "more than 100000 values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			bytes := allocated(func() { _, err = manifest.Parse("corral.yaml", []byte(tc.yaml), manifest.LoadOptions{}) })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "corral.yaml:") {
				t.Fatalf("err = %v, want %q with its position", err, tc.want)
			}
			if bytes > 64<<20 {
				t.Errorf("refusing a %d-byte input allocated %d MiB", len(tc.yaml), bytes>>20)
			}
		})
	}
}

// What real manifests hold passes: brackets in quoted text and scripts,
// a few levels of nesting, a long inline script.
func TestParse_boundsNoFalseAlarm(t *testing.T) {
	yaml := boundsHead + "[a, b]\n    description: \"]]]] text with [brackets] and, commas\"\n" +
		"    provision:\n      - name: s\n        run: |\n" + strings.Repeat("          if [ -f /x ]; then echo \"{a}\"; fi\n", 2000)
	if _, err := manifest.Parse("corral.yaml", []byte(yaml), manifest.LoadOptions{}); err != nil {
		t.Fatalf("a real manifest was refused: %v", err)
	}
}

// BenchmarkParseDepth reports the bytes a parse allocates against the
// nesting depth of its input: flat once the scan refuses (past 64). The
// bytes allocated bound the peak memory from above.
func BenchmarkParseDepth(b *testing.B) {
	for _, depth := range []int{16, 32, 64, 65, 1_000, 100_000} {
		in := []byte(boundsHead + strings.Repeat("[", depth) + strings.Repeat("]", depth) + "\n")
		b.Run("depth-"+strconv.Itoa(depth), func(b *testing.B) { benchParse(b, in) })
	}
}

// BenchmarkParseSize reports the bytes a parse allocates against the
// size of its input, up to the 4 MiB manifest limit: a list of values
// long enough that the scan's 100,000 values are not reached first, and
// each of the worst inputs of TestParse_worstInputsBounded.
func BenchmarkParseSize(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		in := []byte(fillTo(size, boundsHead+"\n", "      - "+strings.Repeat("y", 40)+"\n", ""))
		b.Run("list-"+strconv.Itoa(size>>10)+"KiB", func(b *testing.B) { benchParse(b, in) })
	}
	for name, in := range worstManifests() {
		b.Run(strings.ReplaceAll(name, " ", "-"), func(b *testing.B) { benchParse(b, []byte(in)) })
	}
}

// benchParse parses in b.N times and reports the MiB allocated per parse
// and the input's size.
func benchParse(b *testing.B, in []byte) {
	var total uint64
	for b.Loop() {
		total += allocated(func() { manifest.Parse("corral.yaml", in, manifest.LoadOptions{}) })
	}
	b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "MiB/op")
	b.ReportMetric(float64(len(in))/(1<<10), "input-KiB")
}
