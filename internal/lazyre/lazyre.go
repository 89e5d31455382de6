// Package lazyre holds package-level regular expressions that compile at
// their first use instead of at package init.
//
// A package-level regexp.MustCompile runs in every process that links its
// package, before main, whether or not the process ever matches against
// it. corral links about 160 such patterns (the emulator's PVE
// verifiers, the manifest's field patterns, the client's error forms),
// and the emulator's guest helper re-executes the running binary
// (/proc/self/exe, internal/sim/guest) for every guest command, so each of
// those short processes compiled all of them first: several milliseconds
// of init per process, more under the race detector. A Regexp made by New
// costs an allocation at init and compiles once, when first used.
//
// The price is that a bad pattern no longer stops the program at start:
// it panics at its first use, as regexp.MustCompile would have at init.
// Every Regexp registers itself, and CompileAll compiles all registered
// ones so that a test can fail on a typo (internal/cli's test binary links
// every package that has them).
//
// lazyre imports nothing of corral's, so every package may use it.
package lazyre

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
)

// A Regexp is a regular expression compiled at its first use. It is safe
// for concurrent use, as a *regexp.Regexp is.
type Regexp struct {
	src     string
	compile func(string) (*regexp.Regexp, error)

	once sync.Once
	re   *regexp.Regexp
	err  error

	// memo holds MatchString's answers (bool) for up to memoSize short
	// subjects (memoLen bytes at most), memoN how many it took.
	memo  sync.Map
	memoN atomic.Int32
}

// MatchString remembers its answers for the first memoSize subjects of
// up to memoLen bytes that each Regexp sees: the emulator checks every
// request's parameters against PVE's formats (a VMID, a node, a storage,
// a size), mostly the same few values again and again, and running the
// match was 3-4% of internal/apply's test CPU under -race (issue 30).
// At most about 40 KiB per Regexp (256 entries of up to 64 bytes and
// their map overhead), 160 of them.
const (
	memoSize = 256
	memoLen  = 64
)

// registry lists every Regexp made, for CompileAll.
var registry struct {
	sync.Mutex
	all []*Regexp
}

// New returns a Regexp for src in regexp's (RE2) syntax. It is meant for
// package-level variables: each call registers its result for the life of
// the process. A bad src panics at the Regexp's first use.
func New(src string) *Regexp { return NewFunc(src, compile) }

// compile is regexp.Compile with its error naming src as
// regexp.MustCompile's panic does.
func compile(src string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("regexp: Compile(%q): %w", src, err)
	}
	return re, nil
}

// NewFunc is New with the compilation done by compile (for a pattern
// that is translated first, such as the emulator's Perl ones), whose
// error should name src.
func NewFunc(src string, compile func(string) (*regexp.Regexp, error)) *Regexp {
	r := &Regexp{src: src, compile: compile}
	registry.Lock()
	registry.all = append(registry.all, r)
	registry.Unlock()
	return r
}

// load compiles r once and returns the result.
func (r *Regexp) load() (*regexp.Regexp, error) {
	r.once.Do(func() { r.re, r.err = r.compile(r.src) })
	return r.re, r.err
}

// get returns the compiled expression; a bad pattern panics.
func (r *Regexp) get() *regexp.Regexp {
	re, err := r.load()
	if err != nil {
		panic(err)
	}
	return re
}

// CompileAll compiles every Regexp made so far (in the packages the
// process links) and returns the errors of those that do not compile.
func CompileAll() error {
	registry.Lock()
	all := registry.all[:len(registry.all):len(registry.all)]
	registry.Unlock()
	var errs []error
	for _, r := range all {
		if _, err := r.load(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Count returns how many Regexps have been made, for a test to tell that
// CompileAll saw the ones it expects.
func Count() int {
	registry.Lock()
	defer registry.Unlock()
	return len(registry.all)
}

// The methods below forward to regexp.Regexp's of the same name,
// compiling r first if needed; a bad pattern panics.

// MatchString reports whether s contains any match of r. Short subjects'
// answers are remembered (memoSize).
func (r *Regexp) MatchString(s string) bool {
	if len(s) > memoLen {
		return r.get().MatchString(s)
	}
	if m, ok := r.memo.Load(s); ok {
		return m.(bool)
	}
	m := r.get().MatchString(s)
	if r.memoN.Load() < memoSize && r.memoN.Add(1) <= memoSize {
		r.memo.Store(strings.Clone(s), m) // s may be part of a large body
	}
	return m
}

// FindStringSubmatch returns the leftmost match of r in s and its
// submatches, or nil.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.get().FindStringSubmatch(s) }

// FindAllStringSubmatch returns up to n (all if n < 0) successive matches
// of r in s with their submatches, or nil.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.get().FindAllStringSubmatch(s, n)
}

// ReplaceAllString returns src with the matches of r replaced by repl,
// in which $1 and the like stand for submatches.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.get().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc returns src with each match of r replaced by
// repl's result for it.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.get().ReplaceAllStringFunc(src, repl)
}

// Split slices s into the substrings between the matches of r, at most n
// of them (all if n < 0).
func (r *Regexp) Split(s string, n int) []string { return r.get().Split(s, n) }
