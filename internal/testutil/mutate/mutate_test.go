package mutate

import (
	"bytes"
	"reflect"
	"testing"
)

func TestInputsDeterministicAndTyped(t *testing.T) {
	seeds := [][]any{
		{uint8(3), "a=1,b=2", true},
		{uint8(0), "", false},
	}
	a := New(7, ",", "=").Inputs(seeds, 2000)
	b := New(7, ",", "=").Inputs(seeds, 2000)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different inputs")
	}
	if len(a) != 2000 || !reflect.DeepEqual(a[:2], seeds) {
		t.Fatalf("got %d inputs starting %v, want 2000 starting with the seeds", len(a), a[:2])
	}
	distinct := map[string]bool{}
	var otherWhich bool
	for _, in := range a {
		if len(in) != 3 {
			t.Fatalf("input %v has %d arguments, want 3", in, len(in))
		}
		w, ok0 := in[0].(uint8)
		s, ok1 := in[1].(string)
		_, ok2 := in[2].(bool)
		if !ok0 || !ok1 || !ok2 {
			t.Fatalf("input %#v changed argument types", in)
		}
		if len(s) > MaxLen {
			t.Fatalf("input of %d bytes, over MaxLen", len(s))
		}
		distinct[s] = true
		otherWhich = otherWhich || w > 3
	}
	if len(distinct) < 1000 || !otherWhich {
		t.Errorf("%d distinct strings, integers beyond the seeds: %v; the mutator barely mutates", len(distinct), otherWhich)
	}
	flipped := 0
	for _, in := range New(7).Inputs([][]any{{true}}, 1000) {
		if !in[0].(bool) {
			flipped++
		}
	}
	if flipped < 300 || flipped > 700 {
		t.Errorf("%d of 1000 booleans flipped, want about half", flipped)
	}
	if c := New(8).Inputs(seeds, 50); reflect.DeepEqual(a[:50], c) {
		t.Error("another seed gave the same inputs")
	}
}

func TestBytesLeavesItsInputAlone(t *testing.T) {
	m := New(1, ";")
	seed, pool := []byte("key=value"), [][]byte{[]byte("other"), {}}
	for range 1000 {
		m.Bytes(seed, pool)
	}
	if string(seed) != "key=value" || string(pool[0]) != "other" || len(pool[1]) != 0 {
		t.Fatalf("Bytes changed its arguments: %q %q", seed, pool)
	}
}

func TestCorpusFormat(t *testing.T) {
	args := []any{"a\"b\n\xff", []byte("x\x00y"), uint8(200), true, int(-42), int64(-1 << 63), uint32(1 << 31)}
	data := Marshal(args)
	got, err := Unmarshal(data)
	if err != nil {
		t.Fatalf("Unmarshal(%s): %v", data, err)
	}
	if !reflect.DeepEqual(got, args) {
		t.Fatalf("round trip of %#v gave %#v", args, got)
	}
	// What go test -fuzz itself writes for uint8 and int32.
	native := "go test fuzz v1\nbyte('\\x05')\nbyte('a')\nbyte('é')\nrune('é')\nint32(-5)\n"
	if got, err := Unmarshal([]byte(native)); err != nil || !reflect.DeepEqual(got, []any{uint8(5), uint8('a'), uint8(0xe9), int32('é'), int32(-5)}) {
		t.Errorf("Unmarshal(%q) = %#v, %v", native, got, err)
	}
	for _, bad := range []string{
		"go test fuzz v1\nbyte('Ā')\n",         // out of range
		"go test fuzz v1\nstring('a')\n",       // not a string literal
		"string(\"x\")\n",                      // no header
		"go test fuzz v1\nfloat64(1.5)\n",      // unsupported type
		"go test fuzz v1\nuint8(300)\n",        // out of range
		"go test fuzz v1\nstring(x)\n",         // not a literal
		"go test fuzz v1\n[]byte(\"unclosed\n", // bad syntax
	} {
		if _, err := Unmarshal([]byte(bad)); err == nil {
			t.Errorf("Unmarshal(%q) accepted it", bad)
		}
	}
}

func TestSeedsReadsTheCorpus(t *testing.T) {
	got := Seeds(t, "FuzzExample", [][]any{{"added", false}})
	want := [][]any{{"added", false}, {"from the corpus", true}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Seeds = %#v, want %#v", got, want)
	}
	if got := Seeds(t, "FuzzMissing", nil); len(got) != 0 {
		t.Fatalf("Seeds of a target without a corpus = %v", got)
	}
}

func TestRunVisitsEveryInput(t *testing.T) {
	var seen [][]byte
	Run(t, [][]any{{[]byte("a")}, {[]byte("b")}}, func(t *testing.T, args []any) {
		seen = append(seen, args[0].([]byte))
	})
	if len(seen) != 2 || !bytes.Equal(seen[1], []byte("b")) {
		t.Fatalf("Run visited %q", seen)
	}
}
