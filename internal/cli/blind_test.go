package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// TestTokenThatCannotSeeGuests: a token without VM.Audit gets no guest
// from /cluster/resources. status, plan, apply, destroy and backup say
// so, with the fix, instead of "not created", a create plan or "has no
// container", and every one of them exits non-zero (issue 16, item 7).
func TestTokenThatCannotSeeGuests(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	d.mustRun("apply", "-f", m, "--auto-approve")
	privs := slices.DeleteFunc(slices.Clone(model.OperatorPrivileges), func(p string) bool { return p == "VM.Audit" })
	d.role("NoAudit", privs)
	tok := d.token("blind@pve", "corral")
	tokenID, _, _ := strings.Cut(tok, "=")
	d.acl("/", "NoAudit", "blind@pve", tokenID, true)

	const cause = "the token cannot see guests on node pve: it lacks VM.Audit on /vms"
	for _, tc := range []struct {
		args    []string
		out     string // where the cause must be: stdout or stderr
		notWant []string
	}{
		{[]string{"status", "-f", m}, "stdout", []string{"not created", "create"}},
		{[]string{"plan", "-f", m}, "stdout", []string{"No changes", "+ app notes", "keeper"}},
		{[]string{"plan", "-f", m, "-o", "json"}, "stdout", []string{`"has_changes": true`}},
		{[]string{"apply", "-f", m, "--auto-approve", "--skip-preflight"}, "stdout", []string{"Apply complete"}},
		{[]string{"destroy", "-f", m, "--auto-approve"}, "stdout", []string{"no container; no changes"}},
		{[]string{"backup", "notes", "-f", m}, "stderr", []string{"has no container"}},
	} {
		r := d.corral(tok, true, tc.args...)
		got := r.stdout
		if tc.out == "stderr" {
			got = r.stderr
		}
		if r.code != ExitError || !strings.Contains(got, cause) || !strings.Contains(got, "corral doctor") {
			t.Errorf("corral %s: exit %d, want 1 and the cause on %s\nstdout:\n%s\nstderr:\n%s", strings.Join(tc.args, " "), r.code, tc.out, r.stdout, r.stderr)
		}
		for _, bad := range tc.notWant {
			if strings.Contains(r.stdout+r.stderr, bad) {
				t.Errorf("corral %s says %q:\n%s%s", strings.Join(tc.args, " "), bad, r.stdout, r.stderr)
			}
		}
	}
	// The operator token still sees everything: nothing was created twice.
	if st := d.status(m); len(st.Apps[0].Containers) != 1 {
		t.Errorf("containers after the blind runs: %+v", st.Apps[0].Containers)
	}
}
