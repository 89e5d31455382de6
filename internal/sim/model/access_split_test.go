package model

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestAccessSplitUserID: the hand-written splits of user and token IDs,
// and the token-subid check, answer as the patterns they replaced, on every string of up to four
// characters from an alphabet of the characters that matter and on
// longer random ones. The patterns are the oracle and cost 70 µs a
// string under -race: with CORRAL_TEST_FULL (CI) every four-character
// string and 4,000 random ones are tried (7 CPU-s); without it every
// string of up to three, an eighth of the four-character ones and 1,000
// random ones, a different eighth and draw each day (testenv.Seed).
func TestAccessSplitUserID(t *testing.T) {
	t.Parallel()
	userRe := regexp.MustCompile(`^([^\s:/]+)@([A-Za-z][A-Za-z0-9.\-_]+)$`)
	subidRe := regexp.MustCompile(`^[A-Za-z][A-Za-z0-9.\-_]+$`)
	tokenRe := regexp.MustCompile(`^([^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+)!([A-Za-z][A-Za-z0-9.\-_]+)$`)
	alphabet := []string{"a", "Z", "0", "@", "!", ":", "/", " ", "\t", "\v", ".", "-", "_", "é", "\xff", "`", "{"}
	check := func(s string) {
		t.Helper()
		name, realm, ok := accessSplitUserID(s)
		if m := userRe.FindStringSubmatch(s); (m != nil) != ok || ok && (m[1] != name || m[2] != realm) {
			t.Fatalf("accessSplitUserID(%q) = %q, %q, %v; the pattern: %q", s, name, realm, ok, m)
		}
		if subidRe.MatchString(s) != accessRealmLike(s) {
			t.Fatalf("accessRealmLike(%q) = %v; the token-subid pattern disagrees", s, accessRealmLike(s))
		}
		user, tok, ok := accessSplitTokenID(s)
		if m := tokenRe.FindStringSubmatch(s); (m != nil) != ok || ok && (m[1] != user || m[2] != tok) {
			t.Fatalf("accessSplitTokenID(%q) = %q, %q, %v; the pattern: %q", s, user, tok, ok, m)
		}
	}
	var all func(prefix string, n int)
	fours := 0
	all = func(prefix string, n int) {
		if n > 0 {
			check(prefix)
		} else if fours++; testenv.SampleOf(t, fours, 8) {
			check(prefix)
		}
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			all(prefix+c, n-1)
		}
	}
	all("", 4)
	draws := 1000
	if testenv.Full() {
		draws = 4000
	}
	t.Logf("%d random strings drawn with the seed %s=%d", draws, testenv.SweepSeedVar, testenv.Seed())
	r := rand.New(rand.NewPCG(1, uint64(testenv.Seed())))
	for range draws {
		s := ""
		for range 5 + r.IntN(20) {
			s += alphabet[r.IntN(len(alphabet))]
		}
		check(s)
		check(s + "@pve")
		check(s + "@pve!tok")
		check("app@" + s)
		check("app@pve!" + s)
	}
	for _, s := range []string{"root@pam", "corral-agent-demo@pve!agent", "a@b@pve", "x!y@pve!t1", "@pve", "u@p", "u@pve!", "u@pve!t", "u@pve!tok!en"} {
		check(s)
	}
}

// TestAccessPasswordHash: a hash at the product's work factor names it
// and checks the password; test binaries hash new passwords at 16, and a
// check reads the factor from the stored hash, so both verify.
func TestAccessPasswordHash(t *testing.T) {
	t.Parallel()
	if accessPasswordIterations != 16 {
		t.Fatalf("work factor in a test binary %d, want 16", accessPasswordIterations)
	}
	for _, iter := range []int{accessPasswordWork, accessPasswordIterations} {
		h := accessHashPasswordWork("s3cret pass", iter)
		if want := fmt.Sprintf("pbkdf2-sha256$%d$", iter); !strings.HasPrefix(h, want) {
			t.Errorf("hash %q, want the prefix %q", h, want)
		}
		if !accessCheckPassword(h, "s3cret pass") {
			t.Errorf("work %d: the password does not check against its hash", iter)
		}
		if accessCheckPassword(h, "s3cret pasS") || accessCheckPassword(h, "") {
			t.Errorf("work %d: another password checks", iter)
		}
		if other := accessHashPasswordWork("s3cret pass", iter); other == h {
			t.Errorf("work %d: two hashes of one password share a salt", iter)
		}
	}
	if accessPasswordWork != 4096 {
		t.Errorf("product work factor %d, want 4096", accessPasswordWork)
	}
}
