// Package mutate lets a plain test exercise a fuzz target's property
// without the fuzz engine: it reads the target's seed corpus
// (testdata/fuzz/FuzzX, in the "go test fuzz v1" format), derives a fixed
// number of further inputs from the seeds with a fixed-seed mutator (bit
// flips, byte changes, insertions, deletions, duplications, splices
// between seeds, the format's separators and interesting values: empty,
// huge and odd numbers, unicode, control bytes), and runs the property
// over them, naming the input that broke it in the corpus format so it can
// be committed as a regression seed once the bug is fixed.
//
// The same seed gives the same inputs on every run, so CI's plain
// `go test` covers more than the seeds and stays deterministic.
//
// Only tests import it.
package mutate

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// MaxLen caps the length of a mutated string or []byte.
const MaxLen = 1 << 16

// interesting are values worth trying in any text format.
var interesting = []string{
	"", "0", "-0", "1", "-1", "+1", "00", "0x10", "1e3", "1e309", "-1e309", ".5", "5.", "NaN", "Inf", "-Inf",
	"255", "256", "65535", "65536", "2147483647", "2147483648", "4294967296",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "18446744073709551616",
	"99999999999999999999999999999999999999",
	"\x00", "\xff", "\xfe\xff", "\xc3", "é", "ß", "İ", "日本", "\u202e", "\u200b", "\ufeff", "\U0001F600",
	"\r\n", "\n", "\r", "\t", " ", "\\", "\"", "'", "%", "%s", "${", "}", "\x7f",
	strings.Repeat("A", 300), strings.Repeat("9", 30),
}

// Mutator derives inputs from seeds. Its zero value is not usable; call
// New.
type Mutator struct {
	rng  *rand.Rand
	dict []string
}

// New returns a Mutator whose choices follow seed. dict holds tokens of
// the format under test (separators, keywords) to insert besides the
// built-in interesting values.
func New(seed uint64, dict ...string) *Mutator {
	return &Mutator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), dict: dict}
}

// Inputs returns the seeds followed by mutants of them, n inputs in all
// (or just the seeds if there are n or more). Each mutant copies a seed
// chosen at random and changes each argument by its type: strings and
// byte slices get one to eight edits (with splices from the same
// argument of other seeds), booleans flip half the time, integers take
// an interesting or random value a third of the time.
func (m *Mutator) Inputs(seeds [][]any, n int) [][]any {
	if len(seeds) == 0 {
		panic("mutate: Inputs without seeds")
	}
	out := append([][]any(nil), seeds...)
	pools := make(map[int][][]byte)
	for _, s := range seeds {
		for i, v := range s {
			switch v := v.(type) {
			case string:
				pools[i] = append(pools[i], []byte(v))
			case []byte:
				pools[i] = append(pools[i], v)
			}
		}
	}
	for len(out) < n {
		seed := seeds[m.rng.IntN(len(seeds))]
		args := make([]any, len(seed))
		for i, v := range seed {
			args[i] = m.value(v, pools[i])
		}
		out = append(out, args)
	}
	return out
}

func (m *Mutator) value(v any, pool [][]byte) any {
	switch v := v.(type) {
	case string:
		return string(m.Bytes([]byte(v), pool))
	case []byte:
		return m.Bytes(v, pool)
	case bool:
		return v != (m.rng.IntN(2) == 0)
	case int:
		return int(m.integer(int64(v), math.MinInt, math.MaxInt))
	case int64:
		return m.integer(v, math.MinInt64, math.MaxInt64)
	case int32:
		return int32(m.integer(int64(v), math.MinInt32, math.MaxInt32))
	case uint8:
		return uint8(m.integer(int64(v), 0, math.MaxUint8))
	case uint16:
		return uint16(m.integer(int64(v), 0, math.MaxUint16))
	case uint32:
		return uint32(m.integer(int64(v), 0, math.MaxUint32))
	}
	panic(fmt.Sprintf("mutate: no mutation for %T", v))
}

func (m *Mutator) integer(v, lo, hi int64) int64 {
	switch m.rng.IntN(6) {
	case 0:
		return []int64{lo, hi, 0, 1, max(lo, -1)}[m.rng.IntN(5)]
	case 1:
		span := uint64(hi-lo) + 1 // wraps to 0 for the whole int64 range
		if span == 0 {
			return int64(m.rng.Uint64())
		}
		return lo + int64(m.rng.Uint64N(span))
	}
	return v
}

// Bytes returns a copy of b with one to eight random edits; pool holds
// other seeds to splice from. The result is at most MaxLen long.
func (m *Mutator) Bytes(b []byte, pool [][]byte) []byte {
	b = bytes.Clone(b)
	for range 1 + m.rng.IntN(8) {
		b = m.edit(b, pool)
	}
	if len(b) > MaxLen {
		b = b[:MaxLen]
	}
	return b
}

func (m *Mutator) token() []byte {
	if len(m.dict) > 0 && m.rng.IntN(2) == 0 {
		return []byte(m.dict[m.rng.IntN(len(m.dict))])
	}
	return []byte(interesting[m.rng.IntN(len(interesting))])
}

func (m *Mutator) edit(b []byte, pool [][]byte) []byte {
	at := func() int { return m.rng.IntN(len(b) + 1) }
	span := func() (int, int) {
		i := m.rng.IntN(len(b))
		return i, i + 1 + m.rng.IntN(min(len(b)-i, 16))
	}
	switch op := m.rng.IntN(10); {
	case len(b) > 0 && op == 0: // flip a bit
		b[m.rng.IntN(len(b))] ^= 1 << m.rng.IntN(8)
	case len(b) > 0 && op == 1: // replace a byte
		b[m.rng.IntN(len(b))] = byte(m.rng.IntN(256))
	case len(b) > 0 && op == 2: // delete a run
		i, j := span()
		b = append(b[:i], b[j:]...)
	case len(b) > 0 && op == 3: // duplicate a run
		i, j := span()
		k := at()
		b = append(b[:k], append(bytes.Clone(b[i:j]), b[k:]...)...)
	case len(pool) > 0 && op == 4: // splice: a piece of another seed replaces the tail or a run
		o := pool[m.rng.IntN(len(pool))]
		if len(o) == 0 {
			return b
		}
		i := m.rng.IntN(len(o))
		piece := o[i : i+1+m.rng.IntN(len(o)-i)]
		k := at()
		end := len(b)
		if m.rng.IntN(2) == 0 {
			end = k + m.rng.IntN(len(b)-k+1)
		}
		b = append(b[:k:k], append(bytes.Clone(piece), b[end:]...)...)
	case op == 5 && m.rng.IntN(8) == 0: // the whole input becomes a token
		return m.token()
	case len(b) > 0 && op == 6: // truncate
		return b[:m.rng.IntN(len(b))]
	case op == 7: // insert a random byte
		k := at()
		b = append(b[:k], append([]byte{byte(m.rng.IntN(256))}, b[k:]...)...)
	default: // insert a token
		k := at()
		b = append(b[:k], append(m.token(), b[k:]...)...)
	}
	return b
}

// Seeds returns the corpus go test -fuzz keeps for the fuzz target named
// fuzzName (testdata/fuzz/<fuzzName> in the test's package directory; none
// if that is absent) after the seeds the target adds with f.Add. It fails
// t on a corpus file it cannot read.
func Seeds(t testing.TB, fuzzName string, added [][]any) [][]any {
	t.Helper()
	seeds := append([][]any(nil), added...)
	dir := filepath.Join("testdata", "fuzz", fuzzName)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return seeds
	}
	if err != nil {
		t.Fatalf("reading the seed corpus: %v", err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatalf("reading the seed corpus: %v", err)
		}
		args, err := Unmarshal(data)
		if err != nil {
			t.Fatalf("seed %s: %v", filepath.Join(dir, e.Name()), err)
		}
		seeds = append(seeds, args)
	}
	return seeds
}

const header = "go test fuzz v1\n"

// Marshal writes args in the "go test fuzz v1" corpus file format.
func Marshal(args []any) []byte {
	var b strings.Builder
	b.WriteString(header)
	for _, v := range args {
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, "string(%q)\n", v)
		case []byte:
			fmt.Fprintf(&b, "[]byte(%q)\n", v)
		default:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		}
	}
	return []byte(b.String())
}

// Unmarshal reads a "go test fuzz v1" corpus file: string, []byte, bool
// and integer values (the types the module's fuzz targets take).
func Unmarshal(data []byte) ([]any, error) {
	text, ok := strings.CutPrefix(string(data), header)
	if !ok {
		return nil, fmt.Errorf("not a corpus file: the first line is not %q", strings.TrimSpace(header))
	}
	var args []any
	for line := range strings.SplitSeq(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		v, err := parseValue(line)
		if err != nil {
			return nil, fmt.Errorf("corpus line %q: %w", line, err)
		}
		args = append(args, v)
	}
	return args, nil
}

func parseValue(line string) (any, error) {
	e, err := parser.ParseExpr(line)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return nil, errors.New("want type(value)")
	}
	var typ string
	switch f := call.Fun.(type) {
	case *ast.Ident:
		typ = f.Name
	case *ast.ArrayType:
		if id, ok := f.Elt.(*ast.Ident); ok && f.Len == nil && (id.Name == "byte" || id.Name == "uint8") {
			typ = "[]byte"
		}
	}
	lit, neg := call.Args[0], ""
	if u, ok := lit.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		lit, neg = u.X, "-"
	}
	if id, ok := lit.(*ast.Ident); ok && typ == "bool" {
		return strconv.ParseBool(id.Name)
	}
	bl, ok := lit.(*ast.BasicLit)
	if !ok {
		return nil, errors.New("value is not a literal")
	}
	switch typ {
	case "string", "[]byte":
		if bl.Kind != token.STRING {
			return nil, errors.New("want a string literal")
		}
		s, err := strconv.Unquote(bl.Value)
		if typ == "[]byte" {
			return []byte(s), err
		}
		return s, err
	}
	if bl.Kind == token.CHAR {
		// go test -fuzz writes a uint8 as byte('x') and an int32 as rune('x').
		return parseChar(typ, neg, bl.Value)
	}
	bits := map[string]int{"int": 0, "int64": 64, "int32": 32, "uint8": 8, "byte": 8, "uint16": 16, "uint32": 32}
	size, ok := bits[typ]
	if !ok {
		return nil, fmt.Errorf("type %q not supported", typ)
	}
	if typ[0] == 'i' {
		n, err := strconv.ParseInt(neg+bl.Value, 0, size)
		switch typ {
		case "int":
			return int(n), err
		case "int32":
			return int32(n), err
		}
		return n, err
	}
	n, err := strconv.ParseUint(neg+bl.Value, 0, size)
	switch size {
	case 8:
		return uint8(n), err
	case 16:
		return uint16(n), err
	}
	return uint32(n), err
}

// parseChar reads a character literal as a byte or rune value.
func parseChar(typ, neg, lit string) (any, error) {
	if neg != "" || len(lit) < 3 {
		return nil, errors.New("want a character literal")
	}
	r, _, tail, err := strconv.UnquoteChar(lit[1:len(lit)-1], '\'')
	switch {
	case err != nil:
		return nil, err
	case tail != "":
		return nil, errors.New("more than one character")
	}
	switch typ {
	case "byte", "uint8":
		if r > 0xff {
			return nil, fmt.Errorf("%q is out of range for byte", r)
		}
		return uint8(r), nil
	case "rune", "int32":
		return int32(r), nil
	}
	return nil, fmt.Errorf("type %q does not take a character literal", typ)
}

// Run calls body with each input in turn on t itself (no subtest per
// input, which would cost more than the body). When body fails or
// panics, Run logs the input in the corpus format, to be saved under
// testdata/fuzz/<FuzzName>/ as a regression seed once the bug is fixed,
// and stops.
func Run(t *testing.T, inputs [][]any, body func(t *testing.T, args []any)) {
	t.Helper()
	for i, args := range inputs {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("input %d panicked: %v\n%s", i, r, debug.Stack())
				}
				if t.Failed() {
					t.Logf("failing input %d as a corpus file:\n%s", i, Marshal(args))
				}
			}()
			body(t, args)
		}()
		if t.Failed() {
			return
		}
	}
}
