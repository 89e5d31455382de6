package secretscan

import (
	"fmt"
	"slices"
	"testing"
)

func TestFind(t *testing.T) {
	var s Set
	s.Add(t, "password", `Pa ss/w"rd+1`)
	s.AddToken(t, "token secret", "corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566")
	s.Add(t, "html-ish", "a<b>&cé-secret")
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"nothing to see", nil},
		{`body: password=Pa+ss%2Fw%22rd%2B1&vmid=105`, []string{"password"}},
		{`msg="sent Pa ss/w\"rd+1"`, []string{"password"}},
		{"Authorization: PVEAPIToken=corral@pve!op=0d9e7a2c-5f1b-4c3e-9a8d-112233445566", []string{"token secret"}},
		{"corral@pve!op=REDACTED", nil},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n", []string{"private key"}},
		{"ssh-ed25519 AAAAC3Nza me@host", nil},
		{`{"error":"bad a\u003cb\u003e\u0026cé-secret"}`, []string{"html-ish"}},
	} {
		if got := s.Find(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("Find(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors, fatals []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatalf(format string, a ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, a...))
}

func TestCheckNamesTheSecretNotItsValue(t *testing.T) {
	var s Set
	r := &recorder{TB: t}
	s.Add(r, "root password", "hunter2hunter2")
	s.Check(r, "stderr of corral apply", "level=DEBUG body=hunter2hunter2")
	if len(r.errors) != 1 || r.errors[0] != "secret leak: root password appears in stderr of corral apply" {
		t.Fatalf("errors %q", r.errors)
	}
}

func TestAddRefusesShortSecrets(t *testing.T) {
	var s Set
	r := &recorder{TB: t}
	s.Add(r, "pin", "1234")
	if len(r.fatals) != 1 {
		t.Fatalf("a 4-byte secret was accepted: %q", r.fatals)
	}
}
