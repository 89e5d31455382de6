// Package secretscan is a test-only helper: it fails a test when a secret
// (an API token secret, a root password, the value of an ${env:…}
// reference) or a private key shows up in output a test captured — stdout,
// stderr, log lines, error text. It looks for each secret as written and
// in the encodings a leak usually takes on the way out: URL form encoding
// (a logged request body or query), JSON string escaping, and Go's %q.
//
// Only tests import it.
package secretscan

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// MinLen is the shortest secret a Set accepts: a shorter one would match
// ordinary text by chance and make every scan meaningless.
const MinLen = 6

// privateKeyMarker starts every PEM or OpenSSH private key block
// ("-----BEGIN PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----").
const privateKeyMarker = "PRIVATE KEY-----"

// Set is a set of named secrets. Its zero value is ready for use.
type Set struct {
	names  []string
	values map[string]string // name → value
}

// Add records a secret under a name used in failure messages (the value
// itself is never printed). It fails t when the value is shorter than
// MinLen, since scanning for it would prove nothing.
func (s *Set) Add(t testing.TB, name, value string) {
	t.Helper()
	if len(value) < MinLen {
		t.Fatalf("secretscan: secret %s is %d bytes; use at least %d so a scan means something", name, len(value), MinLen)
	}
	if s.values == nil {
		s.values = map[string]string{}
	}
	if _, dup := s.values[name]; !dup {
		s.names = append(s.names, name)
	}
	s.values[name] = value
}

// AddToken adds the secret part of a PVE API token "user@realm!id=secret".
func (s *Set) AddToken(t testing.TB, name, token string) {
	t.Helper()
	_, secret, ok := strings.Cut(token, "=")
	if !ok {
		t.Fatalf("secretscan: %s is not a user@realm!id=secret token", name)
	}
	s.Add(t, name, secret)
}

// Find returns the names of the secrets found in text, sorted, plus
// "private key" when text holds a private key block.
func (s *Set) Find(text string) []string {
	var hits []string
	for _, name := range s.names {
		for _, form := range forms(s.values[name]) {
			if strings.Contains(text, form) {
				hits = append(hits, name)
				break
			}
		}
	}
	if strings.Contains(text, privateKeyMarker) {
		hits = append(hits, "private key")
	}
	sort.Strings(hits)
	return hits
}

// Check fails t (without stopping it) for each secret found in text; where
// says what text is ("stdout of corral apply").
func (s *Set) Check(t testing.TB, where, text string) {
	t.Helper()
	for _, name := range s.Find(text) {
		t.Errorf("secret leak: %s appears in %s", name, where)
	}
}

// forms are the spellings of v a leak may take.
func forms(v string) []string {
	out := []string{v}
	add := func(f string) {
		for _, have := range out {
			if have == f {
				return
			}
		}
		out = append(out, f)
	}
	add(url.QueryEscape(v))
	add(url.PathEscape(v))
	q := strconv.Quote(v)
	add(q[1 : len(q)-1])
	// encoding/json escapes <, > and & as \u003c… and leaves non-ASCII
	// as is, where %q does neither.
	if j, err := json.Marshal(v); err == nil {
		add(string(j[1 : len(j)-1]))
	}
	return out
}
