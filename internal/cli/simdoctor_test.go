package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/prereq"
)

// TestSimDoctor: `corral sim doctor` prints every check with ok or
// missing and the fix of a missing one, exits 1 exactly when the emulator
// would refuse to start CTs here (guest.CheckLXC), and -o json holds the
// same report. CORRAL_SIM_RUNTIME=view makes a required check fail on any
// machine.
func TestSimDoctor(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), append([]string{"sim", "doctor"}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, rt := range []string{"", "view"} {
		t.Run("runtime="+rt, func(t *testing.T) {
			t.Setenv("CORRAL_SIM_RUNTIME", rt)
			code, text, stderr := run()
			wantCode := ExitOK
			if guest.CheckLXC() != nil {
				wantCode = ExitError
			}
			if code != wantCode {
				t.Fatalf("exit %d, want %d (guest.CheckLXC: %v)\n%s%s", code, wantCode, guest.CheckLXC(), text, stderr)
			}
			code, js, _ := run("-o", "json")
			var r prereq.Report
			if err := json.Unmarshal([]byte(js), &r); err != nil || code != wantCode {
				t.Fatalf("-o json: exit %d, %v\n%s", code, err, js)
			}
			for _, name := range []string{"root", "lxc", "userns", "subuid", "subgid", "mmdebstrap", "zstd", "cgroup2", "memory"} {
				found := false
				for _, c := range r.Checks {
					if c.Name != name {
						continue
					}
					found = true
					state := "ok"
					if !c.OK {
						state = "missing"
						if c.Required {
							state = "MISSING"
						}
						if !strings.Contains(text, "fix: "+c.Fix) {
							t.Errorf("text lacks the fix of %s: %q\n%s", name, c.Fix, text)
						}
					}
					if !strings.Contains(text, state+strings.Repeat(" ", 9-len(state))+name) {
						t.Errorf("text lacks %q for %s\n%s", state, name, text)
					}
				}
				if !found {
					t.Errorf("no check %s in %s", name, js)
				}
			}
			if rt == "view" && (!strings.Contains(text, "MISSING  runtime     CORRAL_SIM_RUNTIME=view") || !strings.Contains(text, "fix: unset CORRAL_SIM_RUNTIME") ||
				!strings.Contains(text, "(CORRAL_SIM_RUNTIME=view)\n") || !strings.Contains(text, "\nMISSING: ")) {
				t.Errorf("view runtime:\n%s", text)
			}
		})
	}
}

// TestDoctor_embeddedChecksThisMachine: `corral doctor` with no endpoint
// (the embedded emulator, whose CTs run here) adds this machine's
// prerequisites, and fails when the emulator refuses to start CTs (here
// forced with CORRAL_SIM_RUNTIME=view and no opt-in to the view).
func TestDoctor_embeddedChecksThisMachine(t *testing.T) {
	t.Setenv("PROXMOX_VE_ENDPOINT", "")
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	m := writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512"))
	doctor := func() (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{"doctor", "-f", m}, strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, stderr := doctor()
	if !strings.Contains(out, "This machine (the embedded emulator runs its containers here; corral sim doctor):") ||
		!strings.Contains(out, "\ncontainers: ") {
		t.Fatalf("doctor (embedded): exit %d\n%s%s", code, out, stderr)
	}
	if code != ExitOK {
		t.Fatalf("doctor (embedded, CTs may start): exit %d\n%s%s", code, out, stderr)
	}

	t.Setenv("CORRAL_SIM_RUNTIME", "view")
	t.Setenv(guest.UnisolatedEnv, "")
	code, out, stderr = doctor()
	if code != ExitError || !strings.Contains(out, "MISSING  runtime     CORRAL_SIM_RUNTIME=view") ||
		!strings.Contains(out, "MISSING: the emulator refuses to start CTs on this machine") {
		t.Fatalf("doctor (embedded, CTs refused): exit %d\n%s%s", code, out, stderr)
	}
}
