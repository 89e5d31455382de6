package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// savedPlanRig is a cluster, a manifest of web (with a root password read
// from the environment) and db, and a place for plan files.
type savedPlanRig struct {
	*cluster
	m, dir string
}

const webPassword = "Pl4n-File-Secret-Pw"

func newSavedPlanRig(t *testing.T) *savedPlanRig {
	ownEnv(t, "WEB_ROOT_PW", webPassword)
	return &savedPlanRig{cluster: newCluster(t), m: writeManifestIn(t, "demo", webWithPassword("512", "256")), dir: t.TempDir()}
}

func webWithPassword(web, db string) string {
	return strings.Replace(webAndDB(web, db), "    memory: "+web+"\n", "    memory: "+web+"\n    password: ${env:WEB_ROOT_PW}\n", 1)
}

// save runs corral plan --out FILE (plus args) and returns FILE.
func (r *savedPlanRig) save(name string, args ...string) string {
	r.t.Helper()
	path := filepath.Join(r.dir, name)
	res := r.run(append([]string{"plan", "-f", r.m, "--out", path}, args...)...)
	if res.code != ExitChanges || !strings.Contains(res.stderr, "Saved this plan to "+path) {
		r.t.Fatalf("plan --out: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return path
}

// TestSavedPlan_appliesExactly: corral apply FILE carries out the saved
// plan without asking (stdin is no terminal), and the file is private,
// atomic (nothing else left in its directory) and free of secrets. The
// same file applied again is stale: its changes are made.
func TestSavedPlan_appliesExactly(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	path := r.save("all.plan")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("plan file mode %v, want 0600", fi.Mode().Perm())
	}
	if ents, _ := os.ReadDir(r.dir); len(ents) != 1 {
		t.Errorf("plan file directory holds %d entries, want the plan alone (no temporary file left)", len(ents))
	}
	text, _ := os.ReadFile(path)
	var secrets secretscan.Set
	secrets.Add(t, "web's root password", webPassword)
	secrets.AddToken(t, "API token", r.srv.Credentials().OperatorToken)
	secrets.Check(t, "saved plan", string(text))
	var head struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(text, &head); err != nil || head.Format != "corral-plan/1" {
		t.Fatalf("plan file format %q (%v)", head.Format, err)
	}

	res := r.run("apply", path)
	if res.code != 0 || !strings.Contains(res.stderr, "Apply complete") {
		t.Fatalf("apply FILE: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if g := r.apiGuests(); g["web"] != 512 || g["db"] != 256 {
		t.Fatalf("after apply FILE the API lists %v", g)
	}
	res = r.run("apply", path)
	if res.code != ExitError || !strings.Contains(res.stderr, "app web: the saved plan has a create, a plan made now a no-op") {
		t.Fatalf("apply FILE again: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// TestSavedPlan_refusesWhatChanged: a saved plan is refused, nothing
// changed, after an edit of a container in the web UI (through the API),
// after an edit of the manifest, and after a change of a secret it
// reads; each refusal names what changed and says to plan again.
func TestSavedPlan_refusesWhatChanged(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	r.mustRun("apply", "-f", r.m, "--auto-approve")
	if err := os.WriteFile(r.m, []byte(webWithPassword("1024", "768")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string
		edit       func(t *testing.T)
	}{
		{name: "web UI edit", want: "its config changed since the plan was made", edit: func(t *testing.T) {
			vmid := r.vmidOf(r.m, "db")
			if err := r.pveClient().UpdateContainerConfig(context.Background(), "pve", vmid, &pve.ConfigUpdate{Raw: map[string]string{"cores": "2"}}); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "manifest edit", want: "the manifest " + r.m + " changed", edit: func(t *testing.T) {
			if err := os.WriteFile(r.m, []byte(webWithPassword("1024", "768")+"# reviewed\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "secret change", want: "a secret the manifest reads", edit: func(t *testing.T) {
			ownEnv(r.t, "WEB_ROOT_PW", webPassword+"-rotated")
			t.Cleanup(func() { ownEnv(r.t, "WEB_ROOT_PW", webPassword) })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := r.save(strings.ReplaceAll(tc.name, " ", "-") + ".plan")
			tc.edit(t)
			res := r.run("apply", path)
			if res.code != ExitError || !strings.Contains(res.stderr, tc.want) ||
				!strings.Contains(res.stderr, "nothing was changed") || !strings.Contains(res.stderr, "run `corral plan --out "+path+"` again") {
				t.Fatalf("apply stale FILE: exit %d, want %q\n%s%s", res.code, tc.want, res.stdout, res.stderr)
			}
			if g := r.apiGuests(); g["web"] != 512 || g["db"] != 256 {
				t.Fatalf("a refused saved plan changed the cluster: %v", g)
			}
		})
	}
}

// TestSavedPlan_targeted: a saved plan of one app carries its app names:
// applying it leaves the other app alone.
func TestSavedPlan_targeted(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	path := r.save("web.plan", "web")
	r.mustRun("apply", path)
	if g := r.apiGuests(); g["web"] != 512 || g["db"] != 0 {
		t.Fatalf("after apply of web's saved plan the API lists %v: want web alone", g)
	}
}

// TestSavedPlan_arguments: what apply and plan --out refuse, before
// anything is read from the cluster.
func TestSavedPlan_arguments(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	path := r.save("web.plan", "web")
	notPlan := filepath.Join(r.dir, "notes.txt")
	os.WriteFile(notPlan, []byte("hello\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", path, "db"}, "one saved plan file, or app names, not both"},
		{[]string{"apply", path, "-f", r.m}, "--file: a saved plan carries its own manifest"},
		{[]string{"apply", filepath.Join(r.dir, "missing.plan")}, "an argument with a dot or a slash is a saved plan file"},
		{[]string{"apply", notPlan}, "not a plan written by `corral plan --out`"},
		{[]string{"plan", "-f", r.m, "--out", "web"}, "a plan file's name needs a dot or a slash"},
		{[]string{"plan", "-f", r.m, "-out", "x.plan"}, "write --out FILE"},
	} {
		res := r.run(tc.args...)
		if res.code != ExitError || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("corral %v: exit %d, want %q\n%s%s", tc.args, res.code, tc.want, res.stdout, res.stderr)
		}
	}
}

// TestSavedPlan_golden pins the saved plan's format (its salt, digests,
// time and paths normalised) and the text of a stale plan's refusal.
func TestSavedPlan_golden(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	path := r.save("web.plan", "web")
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	norm := func(s string) string {
		s = strings.ReplaceAll(s, r.m, "<manifest>")
		s = strings.ReplaceAll(s, path, "<plan>")
		s = regexp.MustCompile(`"(salt|manifest_digest|secrets_digest|created)": "[^"]*"`).ReplaceAllString(s, `"$1": "<$1>"`)
		return s
	}
	testenv.Golden(t, filepath.Join("testdata", "saved_plan.json"), []byte(norm(string(text))))
	r.mustRun("apply", "db", "-f", r.m, "--auto-approve")
	res := r.run("apply", path)
	testenv.Golden(t, filepath.Join("testdata", "saved_plan_stale.txt"), []byte(norm(res.stderr)))
}

// TestSavedPlan_notWithAnInterruptedRestore: a plan that first finishes
// an interrupted restore is not saved (what follows the restore cannot
// be known when it is made), and says what to run.
func TestSavedPlan_notWithAnInterruptedRestore(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	r.mustRun("apply", "-f", r.m, "--auto-approve")
	r.interruptRestore("db")
	path := filepath.Join(r.dir, "x.plan")
	res := r.run("plan", "-f", r.m, "--out", path)
	if res.code != ExitError || !strings.Contains(res.stderr, "not saved: an interrupted restore") || !strings.Contains(res.stderr, "run `corral apply` to finish it") {
		t.Fatalf("plan --out with a restore interrupted: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("plan file written anyway (%v)", err)
	}
}

// TestSavedPlan_refusesAfterAnInterruptedRestore: a restore killed after
// the plan was saved is finished first by any apply, so the saved plan is
// no longer what would run: refused, nothing changed.
func TestSavedPlan_refusesAfterAnInterruptedRestore(t *testing.T) {
	t.Parallel()
	r := newSavedPlanRig(t)
	r.mustRun("apply", "-f", r.m, "--auto-approve")
	if err := os.WriteFile(r.m, []byte(webWithPassword("1024", "256")), 0o644); err != nil {
		t.Fatal(err)
	}
	path := r.save("web.plan")
	r.interruptRestore("db")
	res := r.run("apply", path)
	if res.code != ExitError || !strings.Contains(res.stderr, "a plan made now first finishes an interrupted restore") {
		t.Fatalf("apply FILE after a restore was interrupted: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if g := r.apiGuests(); g["web"] != 512 || g["db-restoring"] == 0 {
		t.Fatalf("a refused saved plan changed the cluster: %v", g)
	}
}
