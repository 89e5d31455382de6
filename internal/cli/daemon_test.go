package cli

import (
	"strings"
	"testing"
)

// TestShellUnquote: the token read from DIR/env is the one sim's
// shellQuote wrote, quotes included.
func TestShellUnquote(t *testing.T) {
	for in, want := range map[string]string{
		`'corral@pve!corral=abc-123'`: "corral@pve!corral=abc-123",
		`'it'\''s'`:                   "it's",
		`plain`:                       "plain",
		`''`:                          "",
	} {
		if got := shellUnquote(in); got != want {
			t.Errorf("shellUnquote(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestDaemonSettingsDifferences: each setting that differs is named with
// both values; equal settings give none.
func TestDaemonSettingsDifferences(t *testing.T) {
	a := daemonSettings{TimeScale: 0.25, Runtime: "view", Unisolated: true}
	if d := a.differences(a); len(d) != 0 {
		t.Fatalf("equal settings differ: %v", d)
	}
	b := daemonSettings{TimeScale: 0, RealTemplates: true}
	got := strings.Join(a.differences(b), "; ")
	for _, want := range []string{"CORRAL_SIM_TIME_SCALE=0.25 (here 0)", `CORRAL_SIM_RUNTIME="view" (here "")`,
		"CORRAL_SIM_UNISOLATED=1 (here unset)", "CORRAL_SIM_REAL_TEMPLATES=unset (here 1)"} {
		if !strings.Contains(got, want) {
			t.Errorf("differences %q lack %q", got, want)
		}
	}
}
