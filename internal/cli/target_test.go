package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testenv"
	"github.com/corralhq/corral/internal/ui"
)

// twoAppManifest declares web (with a retained volume) and db, with the
// memory of each.
const twoAppManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: WEBMEM
    rootfs:
      size: 4G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
  - name: db
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: DBMEM
    rootfs:
      size: 4G
`

func webAndDB(web, db string) string {
	return strings.NewReplacer("WEBMEM", web, "DBMEM", db).Replace(twoAppManifest)
}

// apiGuests reads the containers through the PVE API, as any client
// would: name → maxmem in MiB.
func (c *cluster) apiGuests() map[string]int64 {
	c.t.Helper()
	rs, err := c.pveClient().ClusterResources(context.Background(), "vm")
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int64{}
	for _, r := range rs {
		out[r.Name] = r.MaxMem >> 20
	}
	return out
}

// planJSON is `corral plan -o json` with args, decoded, and its exit status.
func (c *cluster) planJSON(args ...string) (ui.PlanJSON, int) {
	c.t.Helper()
	r := c.run(append([]string{"plan", "-o", "json"}, args...)...)
	var pj ui.PlanJSON
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil {
		c.t.Fatalf("plan -o json %v: exit %d: %v\n%s%s", args, r.code, err, r.stdout, r.stderr)
	}
	return pj, r.code
}

// TestTarget_applyLeavesOtherAppsAlone: corral apply web changes web (and
// makes its keeper), never db, first on create and then on update; the
// plan says what it left out, in text and JSON, and apply says "Apply
// complete" from a fresh plan of web alone.
func TestTarget_applyLeavesOtherAppsAlone(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, webAndDB("512", "256"))

	r := c.run("plan", "web", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "+ app web (create") || strings.Contains(r.stdout, "app db") ||
		!strings.Contains(r.stdout, "1 change to other apps left out: db; run `corral plan` to see them.") {
		t.Fatalf("plan web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.mustRun("apply", "web", "-f", m, "--auto-approve")
	if !strings.Contains(r.stderr, "Apply complete") {
		t.Fatalf("apply web: no Apply complete\n%s", r.stderr)
	}
	if g := c.apiGuests(); g["web"] != 512 || g["db"] != 0 {
		t.Fatalf("after apply web, the API lists %v: want web (512 MiB) and no db", g)
	}

	c.mustRun("apply", "-f", m, "--auto-approve")
	m2 := writeManifest(t, webAndDB("1024", "768"))
	pj, code := c.planJSON("web", "-f", m2)
	if code != ExitChanges || len(pj.Changes) != 1 || pj.Changes[0].App != "web" || pj.LeftOutChanges != 1 ||
		strings.Join(pj.LeftOut, ",") != "db" || strings.Join(pj.Targets, ",") != "web" {
		t.Fatalf("plan web -o json: exit %d, %+v", code, pj)
	}
	r = c.mustRun("apply", "web", "-f", m2, "--auto-approve", "-o", "json")
	var ev struct {
		Type string      `json:"type"`
		Plan ui.PlanJSON `json:"plan"`
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	if err := json.Unmarshal([]byte(first), &ev); err != nil || ev.Type != "plan" || strings.Join(ev.Plan.LeftOut, ",") != "db" || ev.Plan.LeftOutChanges != 1 {
		t.Fatalf("apply web -o json: first event %+v (%v)\n%s", ev, err, r.stdout)
	}
	if g := c.apiGuests(); g["web"] != 1024 || g["db"] != 256 {
		t.Fatalf("after apply web, the API lists %v: want web at 1024 MiB and db still at 256", g)
	}
	r = c.run("plan", "web", "-f", m2)
	if r.code != 0 || !strings.Contains(r.stdout, "No changes to the named apps: web.") {
		t.Fatalf("plan web after apply web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("plan", "-f", m2); r.code != ExitChanges || !strings.Contains(r.stdout, "~ app db") {
		t.Fatalf("plan: exit %d, want db's update left\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestTarget_unknownApp: a name the manifest does not declare is refused
// by plan and apply before anything changes, with the fix.
func TestTarget_unknownApp(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, webAndDB("512", "256"))
	for _, verb := range []string{"plan", "apply"} {
		r := c.run(verb, "wbe", "-f", m, "--auto-approve")
		if verb == "plan" {
			r = c.run(verb, "wbe", "-f", m)
		}
		if r.code != ExitError || !strings.Contains(r.stderr, "app wbe: not in") || !strings.Contains(r.stderr, "its apps: web, db") || !strings.Contains(r.stderr, "check the name") {
			t.Fatalf("%s wbe: exit %d\n%s%s", verb, r.code, r.stdout, r.stderr)
		}
	}
	if g := c.apiGuests(); len(g) != 0 {
		t.Fatalf("a refused apply made %v", g)
	}
}

// TestTarget_destroyLeavesOtherAppsAlone: corral destroy web removes
// web's container only (db stays, as the API shows), keeps web's volume,
// and the next targeted apply brings web back alone.
func TestTarget_destroyLeavesOtherAppsAlone(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, webAndDB("512", "256"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	r := c.mustRun("destroy", "web", "-f", m, "--auto-approve")
	if want := "1 change to other apps left out: db; run `corral destroy` to see them."; !strings.Contains(r.stdout, want) {
		t.Errorf("destroy web does not say what it left out (%q):\n%s", want, r.stdout)
	}
	if g := c.apiGuests(); g["web"] != 0 || g["db"] != 256 {
		t.Fatalf("after destroy web, the API lists %v: want db only", g)
	}
	if r := c.run("destroy", "wbe", "-f", m, "--auto-approve"); r.code != ExitError || !strings.Contains(r.stderr, "check the name") {
		t.Fatalf("destroy wbe: exit %d\n%s", r.code, r.stderr)
	}
	pj, code := c.planJSON("web", "-f", m)
	if code != ExitChanges || len(pj.Changes) != 1 || pj.Changes[0].Action != "create" || pj.Changes[0].Volumes[0].Action != "attach" || pj.LeftOut != nil {
		t.Fatalf("plan web after destroy web: exit %d, %+v", code, pj)
	}
	c.mustRun("apply", "web", "-f", m, "--auto-approve")
	if g := c.apiGuests(); g["web"] != 512 || g["db"] != 256 {
		t.Fatalf("after apply web, the API lists %v", g)
	}
}

// TestTarget_refusesWhatNeedsALeftOutChange: with db's restore
// interrupted (a container tagged corral-restoring-db, as a killed
// corral restore leaves it), which apply finishes before anything else,
// plan web and apply web refuse, saying what must happen first and how;
// web is left as it was.
func TestTarget_refusesWhatNeedsALeftOutChange(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, webAndDB("512", "256"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.interruptRestore("db")
	m2 := writeManifest(t, webAndDB("1024", "256"))
	for _, args := range [][]string{{"plan", "web", "-f", m2}, {"apply", "web", "-f", m2, "--auto-approve"}} {
		r := c.run(args...)
		if r.code != ExitError || !strings.Contains(r.stderr, "app db: an interrupted restore") ||
			!strings.Contains(r.stderr, "run `corral apply` without app names (or name those apps too)") {
			t.Fatalf("corral %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if g := c.apiGuests(); g["web"] != 512 {
		t.Fatalf("a refused apply web changed web: %v", g)
	}
}

// interruptRestore makes a container tagged corral-restoring-APP, as a
// corral restore killed before the new container took over leaves it.
func (c *cluster) interruptRestore(app string) {
	c.t.Helper()
	ctx := context.Background()
	pc := c.pveClient()
	upid, err := pc.CreateContainer(ctx, "pve", &pve.ContainerCreate{VMID: 900, Config: pve.ConfigUpdate{Hostname: pve.Ptr(app + "-restoring")},
		OSTemplate: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", RootFS: pve.MountPoint{Volume: "local-lvm:1"}})
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := pc.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
		c.t.Fatal(err)
	}
	if err := pc.UpdateContainerConfig(ctx, "pve", 900, &pve.ConfigUpdate{Raw: map[string]string{"tags": "corral;" + plan.TagRestoringPrefix + app}}); err != nil {
		c.t.Fatal(err)
	}
}

// TestTarget_helpGolden pins plan's and apply's help, which say how app
// names and saved plan files are told apart and what each does.
func TestTarget_helpGolden(t *testing.T) {
	for _, verb := range []string{"plan", "apply"} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), []string{verb, "--help"}, strings.NewReader(""), &out, &errb); code != 0 {
			t.Fatalf("%s --help: exit %d\n%s", verb, code, errb.String())
		}
		testenv.Golden(t, filepath.Join("testdata", "help_"+verb+".txt"), out.Bytes())
	}
}

// TestTarget_otherAppRefused: db's plan is refused (its bridge does not
// exist); plan web and apply web go on without db, and say in a warning
// that db was left out and why, while a plan of every app is refused.
func TestTarget_otherAppRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	text := webAndDB("512", "256")
	text = text[:strings.Index(text, "  - name: db")] + strings.Replace(text[strings.Index(text, "  - name: db"):], "    memory: 256\n", "    memory: 256\n    network:\n      bridge: vmbr9\n", 1)
	m := writeManifest(t, text)
	if r := c.run("plan", "-f", m); r.code != ExitError || !strings.Contains(r.stdout, "! refused: app db: bridge vmbr9") {
		t.Fatalf("plan: exit %d, want db refused\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := c.run("plan", "web", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "! warning: left out, and refused by a plan of every app: app db: bridge vmbr9") {
		t.Fatalf("plan web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "web", "-f", m, "--auto-approve")
	if g := c.apiGuests(); g["web"] != 512 || g["db"] != 0 {
		t.Fatalf("after apply web the API lists %v", g)
	}
}

// TestTarget_completesAppNames: plan and apply complete the manifest's
// app names, less those already given.
func TestTarget_completesAppNames(t *testing.T) {
	m := writeManifest(t, webAndDB("512", "256"))
	for _, verb := range []string{"plan", "apply"} {
		var out, errb bytes.Buffer
		Run(context.Background(), []string{"__complete", verb, "-f", m, "web", ""}, strings.NewReader(""), &out, &errb)
		if got, _, _ := strings.Cut(out.String(), "\n"); got != "db" {
			t.Errorf("%s web <TAB>: %q, want db", verb, out.String())
		}
	}
}
