package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/prereq"
)

// TestServeRealTemplates: the flag beats CORRAL_SIM_REAL_TEMPLATES, which
// beats the machine's default (prereq.RealTemplates); a stand-in by
// default is said in one line naming what is missing and sim doctor.
func TestServeRealTemplates(t *testing.T) {
	machineRuntime(t) // the machine's own default, not TestMain's view
	hostOK, why := prereq.RealTemplates()
	for _, tc := range []struct {
		name      string
		flagSet   bool
		flag      bool
		env       string
		want      bool
		wantLine  bool
		wantEnvAt string // CORRAL_SIM_REAL_TEMPLATES afterwards
	}{
		{name: "flag on", flagSet: true, flag: true, env: "0", want: true, wantEnvAt: "0"},
		{name: "flag off beats env 1", flagSet: true, flag: false, env: "1", want: false, wantEnvAt: "0"},
		{name: "env 1", env: "1", want: true, wantEnvAt: "1"},
		{name: "env 0", env: "0", want: false, wantEnvAt: "0"},
		{name: "machine default", env: "", want: hostOK, wantLine: !hostOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, _ := model.RealTemplatePath(); !tc.flagSet && tc.env == "" && hostOK && func() bool { _, err := os.Stat(p); return err != nil }() {
				t.Skip("the real template is not built on this machine: the default would build it (minutes)")
			}
			t.Setenv(model.RealTemplateEnv, tc.env)
			var w bytes.Buffer
			if got := serveRealTemplates(context.Background(), tc.flagSet, tc.flag, &w); got != tc.want {
				t.Fatalf("real templates %v, want %v", got, tc.want)
			}
			line := "corral sim: CTs get a stand-in Debian 12 template that boots no init, not the real Debian 12 (" + why + "); `corral sim doctor` lists what the real one needs\n"
			if tc.wantLine != (w.String() == line) || (!tc.wantLine && w.Len() > 0) {
				t.Fatalf("printed %q", w.String())
			}
			if got := os.Getenv(model.RealTemplateEnv); got != tc.wantEnvAt {
				t.Fatalf("%s=%q afterwards, want %q", model.RealTemplateEnv, got, tc.wantEnvAt)
			}
		})
	}
}

// TestSimServe_defaultTemplate: `corral sim serve` with neither flag nor
// environment serves the real Debian 12 where this machine allows it
// (the archive on local is the cached real one, tens of MB) and else the
// stand-in, saying so on stderr. It skips where the real template would
// have to be built first (minutes; TestServeRealTemplates covers the
// decision there).
func TestSimServe_defaultTemplate(t *testing.T) {
	machineRuntime(t) // the machine's own default, not TestMain's view
	t.Setenv(model.RealTemplateEnv, "")
	real, _ := prereq.RealTemplates()
	cached, err := model.RealTemplatePath()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cached); real && err != nil {
		t.Skip("the real template is not built on this machine: serving it would build it (minutes)")
	}
	srv := serveSim(t)
	dir, errb := srv.dir, &srv.errb
	if code := srv.stop(); code != 0 {
		t.Fatalf("sim serve exit %d\n%s", code, errb.String())
	}
	c, err := model.Open(model.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.VolumeInfo("pve", "local:vztmpl/"+model.RealTemplateName)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Contains(errb.String(), "corral sim: CTs get a stand-in Debian 12 template")
	if real && (v.Size < 10<<20 || said) || !real && (v.Size >= 10<<20 || !said) {
		t.Fatalf("machine allows real templates: %v; template size %d; stderr:\n%s", real, v.Size, errb.String())
	}
}

// TestServeRealTemplates_buildFails: where the machine allows the real
// template by default but its build fails (here a stand-in mmdebstrap
// that fails as without a mirror), sim serve gets the stand-in and says
// why, instead of failing to start.
func TestServeRealTemplates_buildFails(t *testing.T) {
	machineRuntime(t) // the machine's own default, not TestMain's view
	t.Setenv(model.RealTemplateEnv, "")
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'E: cannot reach the mirror' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // nothing built
	if ok, why := prereq.RealTemplates(); !ok {
		t.Skipf("this machine does not allow the real template by default (%s)", why)
	}
	var w bytes.Buffer
	if serveRealTemplates(context.Background(), false, false, &w) {
		t.Fatalf("real templates after a failed build\n%s", w.String())
	}
	if !strings.Contains(w.String(), "corral sim: CTs get a stand-in Debian 12 template that boots no init, not the real Debian 12: real template: mmdebstrap: exit status 1: E: cannot reach the mirror") ||
		!strings.Contains(w.String(), "or insist with --real-templates\n") {
		t.Fatalf("printed:\n%s", w.String())
	}
}
