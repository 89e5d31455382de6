package cli

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// TestPlanAndProgressRedactReadValues: a value read through ${env:…} is a
// secret, so the plan (text and JSON) and apply's events show the
// reference, even where they show the value's change.
func TestPlanAndProgressRedactReadValues(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const desc = "Desc-From-The-Env-7Q2x"
	ownEnv(t, "CORRAL_TEST_DESC", desc)
	base := strings.ReplaceAll(appManifest, "MEMORY", "512")
	c.mustRun("apply", "-f", writeManifest(t, base+"    description: plain words\n"), "--auto-approve")

	m := writeManifest(t, base+"    description: ${env:CORRAL_TEST_DESC}\n")
	for _, args := range [][]string{
		{"plan", "-f", m},
		{"plan", "-f", m, "-o", "json"},
		{"apply", "-f", m, "--auto-approve", "--verbose"},
	} {
		r := c.run(args...)
		out := r.stdout + r.stderr
		if strings.Contains(out, desc) {
			t.Errorf("corral %s shows the value read from the environment:\n%s", strings.Join(args, " "), out)
		}
		if !strings.Contains(out, "${env:CORRAL_TEST_DESC}") {
			t.Errorf("corral %s does not show the reference in the description's change:\n%s", strings.Join(args, " "), out)
		}
	}
	// status shows the drift's reasons, which name a template read
	// from the environment.
	const tmpl = "local:vztmpl/Tmpl-From-The-Env-4Hw.tar.zst"
	ownEnv(t, "CORRAL_TEST_TMPL", tmpl)
	mt := writeManifest(t, strings.Replace(base, "template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "template: ${env:CORRAL_TEST_TMPL}", 1))
	for _, args := range [][]string{{"status", "-f", mt}, {"status", "-f", mt, "-o", "json"}} {
		r := c.mustRun(args...)
		if strings.Contains(r.stdout+r.stderr, tmpl) || !strings.Contains(r.stdout, "${env:CORRAL_TEST_TMPL}") {
			t.Errorf("corral %s: want the template change shown by its reference only:\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}
	text, err := c.srv.Cluster().ConfigText(c.status(m).Apps[0].Containers[0].VMID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, desc) {
		t.Errorf("config after apply does not hold the description read from the environment:\n%s", text)
	}
}

type recordObserver struct{ got []string }

func (r *recordObserver) Step(app, phase, detail string) func(error) {
	r.got = append(r.got, "step "+detail)
	return func(err error) { r.got = append(r.got, "done "+err.Error()) }
}
func (r *recordObserver) TaskLog(app, upid, line string) { r.got = append(r.got, "log "+line) }
func (r *recordObserver) Warn(app, msg string)           { r.got = append(r.got, "warn "+msg) }

// TestRedactObserver: every text an executor event carries is redacted.
func TestRedactObserver(t *testing.T) {
	t.Parallel()
	const v = "Val-From-The-Env-9Kp3"
	ownEnv(t, "CORRAL_TEST_VAL", v)
	f, err := manifest.Load(writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512")+"    description: ${env:CORRAL_TEST_VAL}\n"), manifest.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordObserver{}
	o := newRedactObserver(f, rec)
	o.Step("notes", "config", "description="+v)(errors.New("PVE refused " + v))
	o.TaskLog("notes", "", "echo "+v)
	o.Warn("notes", "about "+v)
	want := []string{
		"step description=${env:CORRAL_TEST_VAL}",
		"done PVE refused ${env:CORRAL_TEST_VAL}",
		"log echo ${env:CORRAL_TEST_VAL}",
		"warn about ${env:CORRAL_TEST_VAL}",
	}
	if !slices.Equal(rec.got, want) {
		t.Errorf("events:\n%q\nwant\n%q", rec.got, want)
	}
}
