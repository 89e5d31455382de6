package manifest

import (
	"fmt"

	"github.com/corralhq/corral/internal/localfile"
)

// Limits checked on the raw bytes of a manifest before yaml.v3 sees them.
// yaml.v3 spends time and memory that grow with the square of the nesting
// depth (60,000 nested "[" — 120 KB — took 5.5 GB before its own limit of
// 10,000 levels fired; 200,000 ran out of memory), and a node per value.
// Real manifests nest fewer than ten levels and hold a few hundred values.
const (
	// maxNesting bounds open flow collections ([ and {) and the block
	// levels of one line (indentation and stacked "- " indicators).
	maxNesting = 64
	// maxSeparators bounds the separators that make values: commas, "- "
	// items and ": " keys.
	maxSeparators = 100_000
)

// checkBounds scans data once, building nothing, and returns the first
// limit it crosses with its line and column, or "". It errs on the side of
// counting: a bracket or comma inside a quoted string counts too, so what
// passes is never deeper or wider for yaml.v3 than the scan says; a
// closing bracket never takes the count below zero, so text cannot buy
// depth back.
func checkBounds(data []byte) (line, col int, problem string) {
	if len(data) > localfile.MaxManifest {
		return 1, 1, fmt.Sprintf("the manifest is %d bytes, more than the %d corral reads", len(data), localfile.MaxManifest)
	}
	flow, values := 0, 0
	line, start := 1, 0
	lineDepth := func(i int) int { // block levels at the start of the line at i
		n, j := 0, i
		for j < len(data) && data[j] == ' ' {
			j++
		}
		n = (j - i) / 2
		for j+1 < len(data) && (data[j] == '-' || data[j] == '?') && (data[j+1] == ' ' || data[j+1] == '\t') {
			n++
			j += 2
			for j < len(data) && data[j] == ' ' {
				j++
			}
		}
		return n
	}
	if d := lineDepth(0); d > maxNesting {
		return 1, 1, nestingProblem()
	}
	for i, c := range data {
		switch c {
		case '\n':
			line, start = line+1, i+1
			if d := lineDepth(i + 1); d+flow > maxNesting {
				return line, 1, nestingProblem()
			}
		case '[', '{':
			if flow++; flow > maxNesting {
				return line, i - start + 1, nestingProblem()
			}
		case ']', '}':
			flow = max(flow-1, 0)
		case ',', '-', ':':
			if c != ',' && (i+1 >= len(data) || (data[i+1] != ' ' && data[i+1] != '\n')) {
				continue
			}
			if values++; values > maxSeparators {
				return line, i - start + 1, fmt.Sprintf("the manifest holds more than %d values (list items, keys, commas); a manifest needs a few hundred", maxSeparators)
			}
		}
	}
	return 0, 0, ""
}

func nestingProblem() string {
	return fmt.Sprintf("nested more than %d levels deep (mappings, lists, [ ] and { }); a manifest needs fewer than ten", maxNesting)
}
