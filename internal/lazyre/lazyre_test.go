package lazyre_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/lazyre"
)

// The forwarding methods answer as regexp's own do.
func TestMethodsForward(t *testing.T) {
	const src = `(\w+)=(\d+)`
	lazy, eager := lazyre.New(src), regexp.MustCompile(src)
	const s = "a=1, b=22 c=x"
	upper := func(m string) string { return strings.ToUpper(m) }
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"MatchString", lazy.MatchString(s), eager.MatchString(s)},
		{"MatchString none", lazy.MatchString("none"), eager.MatchString("none")},
		{"FindStringSubmatch", lazy.FindStringSubmatch(s), eager.FindStringSubmatch(s)},
		{"FindAllStringSubmatch", lazy.FindAllStringSubmatch(s, -1), eager.FindAllStringSubmatch(s, -1)},
		{"FindAllStringSubmatch 1", lazy.FindAllStringSubmatch(s, 1), eager.FindAllStringSubmatch(s, 1)},
		{"ReplaceAllString", lazy.ReplaceAllString(s, "$2:$1"), eager.ReplaceAllString(s, "$2:$1")},
		{"ReplaceAllStringFunc", lazy.ReplaceAllStringFunc(s, upper), eager.ReplaceAllStringFunc(s, upper)},
		{"Split", lazy.Split(s, -1), eager.Split(s, -1)},
		{"Split 2", lazy.Split(s, 2), eager.Split(s, 2)},
	} {
		if fmt.Sprint(c.got) != fmt.Sprint(c.want) {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

// A bad pattern costs nothing until its first use, which panics as
// regexp.MustCompile would have at init; CompileAll reports it before
// that. (It stays registered: this binary's CompileAll fails from here
// on, which no other test here minds.)
func TestBadPattern(t *testing.T) {
	bad := lazyre.New(`a(b`)
	err := lazyre.CompileAll()
	if err == nil || !strings.Contains(err.Error(), `"a(b"`) {
		t.Fatalf("CompileAll = %v, want the error of pattern a(b", err)
	}
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("MatchString of a bad pattern did not panic")
		}
		if e, ok := r.(error); !ok || !strings.Contains(e.Error(), "missing closing )") {
			t.Errorf("panic %v, want the compile error", r)
		}
	}()
	bad.MatchString("ab")
}

// NewFunc's compile runs once, at first use, however many goroutines use
// the Regexp at once (run with -race).
func TestCompilesOnce(t *testing.T) {
	var calls atomic.Int32
	re := lazyre.NewFunc(`^x+$`, func(src string) (*regexp.Regexp, error) {
		calls.Add(1)
		return regexp.Compile(src)
	})
	if n := calls.Load(); n != 0 {
		t.Fatalf("compiled %d times before first use, want 0", n)
	}
	var wg sync.WaitGroup
	results := make([]bool, 16)
	for i := range results {
		wg.Go(func() { results[i] = re.MatchString(strings.Repeat("x", i+1)) })
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("compiled %d times, want 1", n)
	}
	if slices.Contains(results, false) {
		t.Errorf("results %v, want all true", results)
	}
}

// A compile function's error is reported by CompileAll and panics at use,
// wrapped with the source.
func TestNewFuncError(t *testing.T) {
	errNo := errors.New("no such dialect")
	re := lazyre.NewFunc(`(?<perl>x)`, func(string) (*regexp.Regexp, error) { return nil, errNo })
	if err := lazyre.CompileAll(); !errors.Is(err, errNo) {
		t.Errorf("CompileAll = %v, want it to wrap %v", err, errNo)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("a failed compile did not panic at use")
		}
	}()
	re.MatchString("x")
}

// TestMatchStringRemembers: MatchString answers as regexp's does for
// short subjects (remembered after their first match) and long ones
// (never remembered), asked twice each from 8 goroutines at once, more
// distinct subjects than the memo holds.
func TestMatchStringRemembers(t *testing.T) {
	const src = `^(?:[a-z][a-z0-9-]*[0-9]|x+)$`
	lazy, eager := lazyre.New(src), regexp.MustCompile(src)
	var subjects []string
	for i := range 200 { // 800 subjects, the memo holds 256
		subjects = append(subjects, fmt.Sprintf("node%d", i), fmt.Sprintf("Node%d", i), strings.Repeat("x", i), fmt.Sprintf("%d-%s1", i, strings.Repeat("a", i%100)))
	}
	var wrong atomic.Int32
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for round := range 2 {
				for i := range subjects {
					s := subjects[(i+g*len(subjects)/8)%len(subjects)]
					if lazy.MatchString(s) != eager.MatchString(s) && wrong.Add(1) < 5 {
						t.Errorf("round %d: MatchString(%q) = %v, regexp says %v", round, s, !eager.MatchString(s), eager.MatchString(s))
					}
				}
			}
		})
	}
	wg.Wait()
}
