package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/sim/model"
)

// These tests drive projects end to end (issue 11, scenarios 5 and 6): an
// app removed from the manifest is destroyed by plan and apply with its
// volumes kept, other projects on the same cluster are never touched, and
// volumes are freed only on purpose with corral volumes rm and prune.

const wikiApp = `  - name: wiki
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 2G
    volumes:
      - name: pages
        size: 1G
        mount: /srv/pages
`

// twoApps is appManifest (app notes) with app wiki after it.
func twoApps() string { return strings.ReplaceAll(appManifest, "MEMORY", "512") + wikiApp }

// volid is the volid the keepers record for app/name, or "".
func volidOf(vols []plan.VolumeInfo, app, name string) string {
	for _, x := range vols {
		if x.App == app && x.Name == name {
			return x.VolID
		}
	}
	return ""
}

// holderOf says where volid is attached ("keeper", "ct N"), or "".
func holderOf(vols []plan.VolumeInfo, volid string) string {
	for _, x := range vols {
		if x.VolID == volid {
			return x.Holder
		}
	}
	return ""
}

// vmidOf is the VMID of app's one container, from corral status.
func (c *cluster) vmidOf(m, app string) int {
	c.t.Helper()
	for _, a := range c.status(m).Apps {
		if a.App == app && len(a.Containers) == 1 {
			return a.Containers[0].VMID
		}
	}
	c.t.Fatalf("app %s has no single container", app)
	return 0
}

// exists reports whether a CT exists in the emulator.
func (c *cluster) exists(vmid int) bool {
	_, err := c.srv.Cluster().ConfigText(vmid)
	return err == nil
}

// TestRemovedAppIsDestroyedAndComesBack is scenario 5: an app removed from
// the manifest is planned for destruction with its reason, apply destroys
// its container and keeps its volume in the keeper, and putting the app
// back attaches the same volume with the same data.
func TestRemovedAppIsDestroyedAndComesBack(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	both := writeManifestIn(t, "demo", twoApps()) // defaulted: rewrite edits it in place
	c.mustRun("apply", "-f", both, "--auto-approve")
	wiki := c.vmidOf(both, "wiki")
	if tags := c.config(wiki)["tags"]; tags != "corral;corral-app-wiki;corral-project-demo" {
		t.Errorf("wiki's tags = %q, want corral's three", tags)
	}
	pages := volidOf(c.volumes(), "wiki", "pages")
	if err := os.WriteFile(c.file(pages, "page.md"), []byte("# kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	notesOnly := rewrite(t, both, strings.ReplaceAll(appManifest, "MEMORY", "512")) // both, edited
	r := c.run("plan", "-f", notesOnly)
	if r.code != ExitChanges {
		t.Fatalf("plan without wiki: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"- app wiki (delete ct " + strconv.Itoa(wiki) + " on pve)",
		"# app wiki was removed from the manifest",
		"volume pages: detach (" + pages + ", at /srv/pages)",
		"Plan: 1 to delete.",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plan lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "not in this manifest") {
		t.Errorf("plan still warns about the removed app instead of planning it:\n%s", r.stdout)
	}
	r = c.run("plan", "-f", notesOnly, "-o", "json")
	var pj struct {
		Changes []struct {
			App     string   `json:"app"`
			Action  string   `json:"action"`
			OldVMID int      `json:"old_vmid"`
			Reasons []string `json:"reasons"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if n := len(pj.Changes); n != 2 || pj.Changes[1].App != "wiki" || pj.Changes[1].Action != "delete" || pj.Changes[1].OldVMID != wiki ||
		pj.Changes[1].Reasons[0] != "app wiki was removed from the manifest" {
		t.Errorf("plan -o json changes = %+v", pj.Changes)
	}

	// Without --auto-approve and a terminal: nothing is destroyed.
	if r := c.run("apply", "-f", notesOnly); r.code != ExitError || !strings.Contains(r.stderr, "--auto-approve") || !c.exists(wiki) {
		t.Fatalf("apply without approval: exit %d, ct %d exists %v\n%s", r.code, wiki, c.exists(wiki), r.stderr)
	}
	c.mustRun("apply", "-f", notesOnly, "--auto-approve")
	if c.exists(wiki) {
		t.Errorf("ct %d of the removed app still exists", wiki)
	}
	if h := holderOf(c.volumes(), pages); h != "keeper" {
		t.Errorf("removed app's volume %s is held by %q, want keeper", pages, h)
	}
	if got, err := os.ReadFile(c.file(pages, "page.md")); err != nil || string(got) != "# kept" {
		t.Errorf("removed app's data: %q, %v", got, err)
	}
	if r := c.run("plan", "-f", notesOnly); r.code != 0 {
		t.Errorf("plan after the prune: exit %d\n%s", r.code, r.stdout)
	}

	rewrite(t, both, twoApps()) // wiki back in the manifest
	c.mustRun("apply", "-f", both, "--auto-approve")
	back := c.vmidOf(both, "wiki")
	if got := holderOf(c.volumes(), pages); got != "ct "+strconv.Itoa(back) {
		t.Errorf("wiki's volume %s is held by %q after it came back, want ct %d", pages, got, back)
	}
	if got, err := os.ReadFile(c.file(pages, "page.md")); err != nil || string(got) != "# kept" {
		t.Errorf("data after the app came back: %q, %v", got, err)
	}
}

// TestProjectsLeaveEachOtherAlone: two manifests in two directories are
// two projects on one cluster; neither apply touches the other's app,
// and a manifest that names the other project's app is refused.
func TestProjectsLeaveEachOtherAlone(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	shop := writeManifestIn(t, "shop", strings.ReplaceAll(appManifest, "MEMORY", "512"))
	blog := writeManifestIn(t, "blog", "apps:\n"+wikiApp)
	c.mustRun("apply", "-f", shop, "--auto-approve")
	c.mustRun("apply", "-f", blog, "--auto-approve")
	notes, wiki := c.vmidOf(shop, "notes"), c.vmidOf(blog, "wiki")
	if tags := c.config(wiki)["tags"]; !strings.Contains(tags, "corral-project-blog") {
		t.Errorf("wiki's tags = %q, want corral-project-blog", tags)
	}
	for _, m := range []string{shop, blog} {
		r := c.run("plan", "-f", m)
		if r.code != 0 || strings.Contains(r.stdout, "warning") {
			t.Errorf("plan of %s: exit %d, want 0 without warnings\n%s", m, r.code, r.stdout)
		}
		c.mustRun("apply", "-f", m, "--auto-approve")
	}
	if !c.exists(notes) || !c.exists(wiki) {
		t.Fatalf("an apply destroyed the other project's container (notes %v, wiki %v)", c.exists(notes), c.exists(wiki))
	}
	// shop naming blog's app is refused, and changes nothing.
	grab := writeManifestIn(t, "shop", twoApps())
	r := c.run("apply", "-f", grab, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stdout, "refused: app wiki: container "+strconv.Itoa(wiki)+" on pve carries the tag corral-project-blog") {
		t.Errorf("apply of another project's app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// destroy from shop cannot reach blog's app either.
	r = c.run("destroy", "-f", shop, "wiki", "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stderr, `app "wiki" is not in `) {
		t.Errorf("destroy of another project's app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !c.exists(wiki) || c.vmidOf(blog, "wiki") != wiki {
		t.Errorf("blog's wiki was touched")
	}
	// corral volumes says whose each volume is.
	rows := map[string]string{}
	for _, line := range strings.Split(c.mustRun("volumes").stdout, "\n") {
		if f := strings.Fields(line); len(f) >= 8 {
			rows[f[0]+"/"+f[1]] = f[len(f)-1]
		}
	}
	if rows["APP/VOLUME"] != "PROJECT" || rows["notes/data"] != "shop" || rows["wiki/pages"] != "blog" {
		t.Errorf("corral volumes projects: %v", rows)
	}
}

// TestDestroyRemovedApp: corral destroy APP works for an app of this
// project that the manifest no longer lists; its volume stays.
func TestDestroyRemovedApp(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	both := writeManifestIn(t, "demo", twoApps()) // defaulted: rewrite edits it in place
	c.mustRun("apply", "-f", both, "--auto-approve")
	wiki := c.vmidOf(both, "wiki")
	pages := volidOf(c.volumes(), "wiki", "pages")

	notesOnly := rewrite(t, both, strings.ReplaceAll(appManifest, "MEMORY", "512")) // both, edited
	r := c.mustRun("destroy", "-f", notesOnly, "wiki", "--auto-approve", "-o", "json")
	var out struct {
		Destroyed []int    `json:"destroyed"`
		Freed     []string `json:"freed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(out.Destroyed) != 1 || out.Destroyed[0] != wiki || len(out.Freed) != 0 {
		t.Errorf("destroy wiki = %+v, want ct %d destroyed and nothing freed", out, wiki)
	}
	if c.exists(wiki) {
		t.Errorf("ct %d still exists", wiki)
	}
	if h := holderOf(c.volumes(), pages); h != "keeper" {
		t.Errorf("volume %s held by %q, want keeper", pages, h)
	}
	if !c.exists(c.vmidOf(notesOnly, "notes")) {
		t.Errorf("notes was touched")
	}
}

// freeJSON is `corral volumes rm|prune -o json` decoded.
type freeJSON struct {
	Plan struct {
		Volumes []struct {
			Node    string `json:"node"`
			Keeper  int    `json:"keeper"`
			App     string `json:"app"`
			Name    string `json:"name"`
			VolID   string `json:"volid"`
			Size    int64  `json:"size"`
			Project string `json:"project"`
			Reason  string `json:"reason"`
		} `json:"volumes"`
		Warnings []string `json:"warnings"`
		Refused  []string `json:"refused"`
	} `json:"plan"`
	Freed []string `json:"freed"`
}

func decodeFree(t *testing.T, r result) freeJSON {
	t.Helper()
	var out freeJSON
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("-o json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return out
}

// gone reports whether a volume no longer exists on the emulator's storage.
func (c *cluster) gone(volid string) bool {
	_, err := c.srv.Cluster().VolumePath("pve", volid)
	return err != nil
}

// TestVolumesRm is scenario 6 for one volume: a removed app's retained
// volume is freed on purpose; a volume an app's container mounts and an
// unknown volid are refused with nothing changed; nothing changes without
// --auto-approve and a terminal.
func TestVolumesRm(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	both := writeManifestIn(t, "demo", twoApps()) // defaulted: rewrite edits it in place
	c.mustRun("apply", "-f", both, "--auto-approve")
	notesOnly := rewrite(t, both, strings.ReplaceAll(appManifest, "MEMORY", "512")) // both, edited
	c.mustRun("apply", "-f", notesOnly, "--auto-approve")
	vols := c.volumes()
	pages, data := volidOf(vols, "wiki", "pages"), volidOf(vols, "notes", "data")
	notes := c.vmidOf(notesOnly, "notes")

	// Attached to an app's container: refused, text and JSON.
	r := c.run("volumes", "rm", data, "-f", notesOnly, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stdout, "! refused: "+data+" is referenced by CT "+strconv.Itoa(notes)) ||
		!strings.Contains(r.stderr, "volumes rm refused; nothing was changed") {
		t.Errorf("rm of a mounted volume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("volumes", "rm", data, "-f", notesOnly, "--auto-approve", "-o", "json")
	if out := decodeFree(t, r); r.code != ExitError || len(out.Plan.Refused) != 1 || len(out.Freed) != 0 || out.Freed == nil {
		t.Errorf("rm -o json of a mounted volume: exit %d %+v", r.code, out)
	}
	// Unknown: refused with what to do.
	r = c.run("volumes", "rm", "local-lvm:vm-4242-disk-9", "-f", notesOnly, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stdout, "local-lvm:vm-4242-disk-9 is not a volume corral keeps: no keeper records or holds it") {
		t.Errorf("rm of an unknown volid: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// One refused volume refuses the whole command.
	r = c.run("volumes", "rm", pages, data, "-f", notesOnly, "--auto-approve")
	if r.code != ExitError || c.gone(pages) {
		t.Errorf("rm of a free and a mounted volume: exit %d, pages gone %v\n%s", r.code, c.gone(pages), r.stdout)
	}
	// Without --auto-approve and a terminal: the plan, then nothing.
	r = c.run("volumes", "rm", pages, "-f", notesOnly)
	if r.code != ExitError || !strings.Contains(r.stderr, "--auto-approve") || !strings.Contains(r.stdout, "- volume wiki/pages ("+pages+" on pve, 1 GiB, keeper ") || c.gone(pages) {
		t.Errorf("rm without approval: exit %d, pages gone %v\n%s%s", r.code, c.gone(pages), r.stdout, r.stderr)
	}

	r = c.mustRun("volumes", "rm", pages, "-f", notesOnly, "--auto-approve", "-o", "json")
	out := decodeFree(t, r)
	if len(out.Freed) != 1 || out.Freed[0] != pages || len(out.Plan.Volumes) != 1 {
		t.Fatalf("rm -o json: %+v", out)
	}
	if v := out.Plan.Volumes[0]; v.App != "wiki" || v.Name != "pages" || v.VolID != pages || v.Node != "pve" || v.Keeper == 0 || v.Size != 1<<30 ||
		v.Project != "demo" || v.Reason != "named on the command line" || out.Plan.Refused == nil || out.Plan.Warnings == nil {
		t.Errorf("rm -o json plan: %+v", out.Plan)
	}
	if !c.gone(pages) {
		t.Errorf("%s still on storage after rm", pages)
	}
	if v := volidOf(c.volumes(), "wiki", "pages"); v != "" {
		t.Errorf("wiki/pages still recorded as %s", v)
	}
	if c.gone(data) || holderOf(c.volumes(), data) != "ct "+strconv.Itoa(notes) {
		t.Errorf("notes' data volume was touched")
	}
	if r := c.run("plan", "-f", notesOnly); r.code != 0 {
		t.Errorf("plan after rm: exit %d\n%s", r.code, r.stdout)
	}
}

// TestVolumesPrune is scenario 6 for a whole project: after a removed app
// and a restore --replace, prune frees the removed app's volume and the
// *-replaced-* copies, and keeps the declared volumes and another
// project's.
func TestVolumesPrune(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	both := writeManifestIn(t, "demo", twoApps()) // defaulted: rewrite edits it in place
	c.mustRun("apply", "-f", both, "--auto-approve")
	blog := writeManifestIn(t, "blog", strings.ReplaceAll("apps:\n"+wikiApp, "wiki", "news"))
	c.mustRun("apply", "-f", blog, "--auto-approve")
	c.mustRun("destroy", "-f", blog, "--auto-approve")                              // blog's volume waits in the keeper
	notesOnly := rewrite(t, both, strings.ReplaceAll(appManifest, "MEMORY", "512")) // both, edited
	c.mustRun("apply", "-f", notesOnly, "--auto-approve")
	b := c.backup(notesOnly, "notes")
	c.mustC("restore", "notes", "--archive", b.Archive, "--replace", "-f", notesOnly, "--auto-approve")

	vols := c.volumes()
	want := map[string]bool{volidOf(vols, "wiki", "pages"): true}
	keep := map[string]bool{volidOf(vols, "notes", "data"): true, volidOf(vols, "notes", "cache"): true, volidOf(vols, "news", "pages"): true}
	for _, v := range vols {
		if strings.Contains(v.Name, "-replaced-") {
			want[v.VolID] = true
		}
	}
	if len(want) != 3 || len(keep) != 3 || want[""] || keep[""] {
		t.Fatalf("setup: prune %v, keep %v, volumes %+v", want, keep, vols)
	}

	// Without --auto-approve and a terminal: nothing changes.
	r := c.run("volumes", "prune", "-f", notesOnly)
	if r.code != ExitError || !strings.Contains(r.stderr, "review the volumes listed above (`corral volumes prune` prints them and asks) and pass --auto-approve") || strings.Contains(r.stderr, "corral plan") || !strings.Contains(r.stdout, "Plan: 3 volume(s) to free") {
		t.Errorf("prune without approval: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for volid := range want {
		if c.gone(volid) {
			t.Errorf("prune without approval freed %s", volid)
		}
	}

	out := decodeFree(t, c.mustRun("volumes", "prune", "-f", notesOnly, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 3 {
		t.Errorf("freed %v, want 3", out.Freed)
	}
	for _, v := range out.Plan.Volumes {
		wantReason := "left by restore --replace"
		if v.App == "wiki" {
			wantReason = "app wiki is not in the manifest"
		}
		if v.Reason != wantReason {
			t.Errorf("%s/%s: reason %q, want %q", v.App, v.Name, v.Reason, wantReason)
		}
	}
	for volid := range want {
		if !c.gone(volid) {
			t.Errorf("%s still on storage after prune", volid)
		}
	}
	after := c.volumes()
	for volid := range keep {
		if c.gone(volid) || holderOf(after, volid) == "" {
			t.Errorf("prune freed or forgot %s, which it must keep", volid)
		}
	}
	if r := c.run("plan", "-f", notesOnly); r.code != 0 {
		t.Errorf("plan after prune: exit %d\n%s", r.code, r.stdout)
	}
	if r := c.run("plan", "-f", blog); r.code != ExitChanges || !strings.Contains(r.stdout, "volume pages: attach") {
		t.Errorf("blog's plan after demo's prune: exit %d, want its kept volume attached\n%s", r.code, r.stdout)
	}
	// Nothing left: exit 0, nothing freed.
	r = c.mustRun("volumes", "prune", "-f", notesOnly, "--auto-approve")
	if !strings.Contains(r.stdout, "No volumes to free.") {
		t.Errorf("second prune:\n%s", r.stdout)
	}
}

// TestContainerWithoutProjectTag: a container made before projects (no
// corral-project tag) belongs to the project whose manifest names its
// app, and the next apply adds the tag in place; a manifest that does not
// name it leaves it alone with a warning.
func TestContainerWithoutProjectTag(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	both := writeManifestIn(t, "demo", twoApps()) // defaulted: rewrite edits it in place
	c.mustRun("apply", "-f", both, "--auto-approve")
	notes, wiki := c.vmidOf(both, "notes"), c.vmidOf(both, "wiki")
	root := model.Auth{UserID: "root@pam"}
	for vmid, app := range map[int]string{notes: "notes", wiki: "wiki"} {
		if err := c.srv.Cluster().UpdateCTConfig(root, "pve", vmid, map[string]string{"tags": "corral;corral-app-" + app}); err != nil {
			t.Fatal(err)
		}
	}
	// Another project's manifest that names neither: both left alone.
	other := writeManifestIn(t, "other", strings.ReplaceAll("apps:\n"+wikiApp, "wiki", "news"))
	c.mustRun("apply", "-f", other, "--auto-approve")
	if !c.exists(notes) || !c.exists(wiki) {
		t.Fatalf("another project's apply destroyed an untagged container")
	}
	// This project's manifest names only notes: notes gets its tag back,
	// wiki (untagged, named by no manifest here) is left with a warning.
	notesOnly := rewrite(t, both, strings.ReplaceAll(appManifest, "MEMORY", "512")) // both, edited
	r := c.run("plan", "-f", notesOnly)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "~ tags: corral;corral-app-notes → corral;corral-app-notes;corral-project-demo") ||
		!strings.Contains(r.stdout, "container "+strconv.Itoa(wiki)+" (app wiki) is managed by corral but not in this manifest, and carries no project tag") ||
		strings.Contains(r.stdout, "- app wiki") {
		t.Errorf("plan: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", notesOnly, "--auto-approve")
	if tags := c.config(notes)["tags"]; tags != "corral;corral-app-notes;corral-project-demo" {
		t.Errorf("notes' tags after apply = %q", tags)
	}
	if !c.exists(wiki) {
		t.Errorf("the untagged wiki was destroyed")
	}
}

// TestRecordsMadeBeforeProjects: a cluster set up before projects (no
// project tags, no corral-project lines in the keeper's Notes) is brought
// into its project by the next apply, so that an app removed afterwards
// leaves volumes prune can free.
func TestRecordsMadeBeforeProjects(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	both := writeManifestIn(t, "demo", twoApps()) // defaulted: rewrite edits it in place
	c.mustRun("apply", "-f", both, "--auto-approve")
	root := model.Auth{UserID: "root@pam"}
	for _, app := range []string{"notes", "wiki"} {
		if err := c.srv.Cluster().UpdateCTConfig(root, "pve", c.vmidOf(both, app), map[string]string{"tags": "corral;corral-app-" + app}); err != nil {
			t.Fatal(err)
		}
	}
	k := c.keepers()[0]
	conf, _, err := c.srv.Cluster().CTConfig(root, "pve", k, true, "")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(conf["description"], "\n") {
		if !strings.HasPrefix(line, "corral-project: ") {
			kept = append(kept, line)
		}
	}
	if len(kept) == len(strings.Split(conf["description"], "\n")) {
		t.Fatalf("the keeper's Notes have no corral-project lines:\n%s", conf["description"])
	}
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, map[string]string{"description": strings.Join(kept, "\n")}); err != nil {
		t.Fatal(err)
	}
	pages := volidOf(c.volumes(), "wiki", "pages")

	r := c.run("plan", "-f", both)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "# note that app wiki's volumes belong to project demo (the keeper recorded no project for them") {
		t.Fatalf("plan: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", both, "--auto-approve")
	if r := c.run("plan", "-f", both); r.code != 0 {
		t.Errorf("plan after the apply: exit %d\n%s", r.code, r.stdout)
	}
	notesOnly := rewrite(t, both, strings.ReplaceAll(appManifest, "MEMORY", "512")) // both, edited
	c.mustRun("apply", "-f", notesOnly, "--auto-approve")
	out := decodeFree(t, c.mustRun("volumes", "prune", "-f", notesOnly, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 1 || out.Freed[0] != pages || !c.gone(pages) {
		t.Errorf("prune freed %v, want the removed wiki's %s", out.Freed, pages)
	}
}

// rewrite writes text over the manifest at path m (the same manifest,
// edited) and returns m.
func rewrite(t *testing.T, m, text string) string {
	t.Helper()
	if err := os.WriteFile(m, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDefaultProjectsCollide is issue 26, scenario 2: shop/app/corral.yaml
// and blog/app/corral.yaml both default to project app. Blog's plan and
// apply refuse to destroy shop's app (naming its container and shop's
// manifest), blog's prune and rm refuse shop's kept volume, a blog app on
// shop's kept volumes is refused, and shop's own removals go ahead. Blog
// taking over with an explicit project: app destroys and frees them.
func TestDefaultProjectsCollide(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	shop := writeManifestIn(t, "shop/app", twoApps())
	c.mustRun("apply", "-f", shop, "--auto-approve")
	wiki := c.vmidOf(shop, "wiki")
	// shop's own removal: its plan names why and who declared the app.
	rewrite(t, shop, strings.ReplaceAll(appManifest, "MEMORY", "512"))
	r := c.run("plan", "-f", shop)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "# app wiki was declared by the manifest ") || !strings.Contains(r.stdout, shop) {
		t.Fatalf("shop's plan without wiki: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", shop, "--auto-approve")
	if c.exists(wiki) {
		t.Fatalf("shop's apply left wiki's container %d", wiki)
	}
	notes, pages := c.vmidOf(shop, "notes"), volidOf(c.volumes(), "wiki", "pages")

	blog := writeManifestIn(t, "blog/app", "apps:\n"+strings.ReplaceAll(wikiApp, "wiki", "news"))
	refusal := "refused: app notes (container " + strconv.Itoa(notes) + " on pve) is not in this manifest"
	for _, args := range [][]string{{"plan", "-f", blog}, {"apply", "-f", blog, "--auto-approve"}} {
		r := c.run(args...)
		if r.code != ExitError || !strings.Contains(r.stdout, refusal) || !strings.Contains(r.stdout, "declared by the manifest ") ||
			!strings.Contains(r.stdout, shop) || !strings.Contains(r.stdout, "set project: app in this manifest") {
			t.Errorf("blog's %s: exit %d, want the delete of shop's notes refused\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
	}
	if !c.exists(notes) || c.vmidOf(shop, "notes") != notes {
		t.Fatalf("blog's apply touched shop's notes")
	}
	if r := c.run("destroy", "-f", blog, "notes", "--auto-approve"); r.code != ExitError || !strings.Contains(r.stderr, "app notes (container "+strconv.Itoa(notes)) {
		t.Errorf("blog's destroy notes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"volumes", "prune", "-f", blog, "--auto-approve"}, {"volumes", "rm", pages, "-f", blog, "--auto-approve"}} {
		r := c.run(args...)
		if r.code != ExitError || !strings.Contains(r.stdout+r.stderr, "volume wiki/pages ("+pages+") was declared by another manifest") || c.gone(pages) {
			t.Errorf("blog's %s: exit %d, gone %v, want shop's volume refused\n%s%s", args[1], r.code, c.gone(pages), r.stdout, r.stderr)
		}
	}
	// A blog manifest that names shop's notes does not destroy it.
	if r := c.run("destroy", "-f", writeManifestIn(t, "blog/app", strings.ReplaceAll(appManifest, "MEMORY", "512")), "--auto-approve"); r.code != ExitError ||
		!strings.Contains(r.stdout, "refused: app notes (container "+strconv.Itoa(notes)+" on pve) was declared by the manifest ") || !c.exists(notes) {
		t.Errorf("destroy from a blog manifest naming notes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A blog app named wiki would mount shop's kept volume.
	grab := writeManifestIn(t, "blog/app", "apps:\n"+wikiApp)
	if r := c.run("plan", "-f", grab); r.code != ExitError || !strings.Contains(r.stdout, "refused: app wiki: the keeper keeps its volumes") {
		t.Errorf("blog's plan of wiki: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Blog says it replaced shop: an explicit project takes over.
	rewrite(t, blog, "project: app\napps:\n"+strings.ReplaceAll(wikiApp, "wiki", "news"))
	c.mustRun("apply", "-f", blog, "--auto-approve")
	if c.exists(notes) {
		t.Errorf("blog with project: app left notes %d", notes)
	}
	c.mustRun("volumes", "prune", "-f", blog, "--auto-approve")
	if !c.gone(pages) {
		t.Errorf("blog with project: app did not prune %s", pages)
	}
	if r := c.run("plan", "-f", blog); r.code != 0 {
		t.Errorf("blog's plan after the takeover: exit %d\n%s", r.code, r.stdout)
	}
}

// TestDeclarersMadeBefore: a cluster set up before corral recorded who
// declares an app (no corral-declared lines on the containers or in the
// keeper) is refused nothing it names: the next apply records this
// manifest as the declarer, so that an app removed afterwards is
// destroyed and its kept volume pruned under the defaulted project.
func TestDeclarersMadeBefore(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifestIn(t, "demo", twoApps()) // a defaulted project
	c.mustRun("apply", "-f", m, "--auto-approve")
	root := model.Auth{UserID: "root@pam"}
	strip := func(vmid int) {
		conf, _, err := c.srv.Cluster().CTConfig(root, "pve", vmid, true, "")
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for _, line := range strings.Split(conf["description"], "\n") {
			if !strings.HasPrefix(line, "corral-declared: ") {
				kept = append(kept, line)
			}
		}
		if len(kept) == len(strings.Split(conf["description"], "\n")) {
			t.Fatalf("ct %d records no declarer:\n%s", vmid, conf["description"])
		}
		if err := c.srv.Cluster().UpdateCTConfig(root, "pve", vmid, map[string]string{"description": strings.Join(kept, "\n")}); err != nil {
			t.Fatal(err)
		}
	}
	strip(c.keepers()[0])
	strip(c.vmidOf(m, "notes"))
	strip(c.vmidOf(m, "wiki"))
	pages := volidOf(c.volumes(), "wiki", "pages")

	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "# note that app wiki's volumes were declared by the manifest ") ||
		!strings.Contains(r.stdout, "# record that the manifest ") {
		t.Fatalf("plan: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after the apply: exit %d\n%s", r.code, r.stdout)
	}
	rewrite(t, m, strings.ReplaceAll(appManifest, "MEMORY", "512"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	out := decodeFree(t, c.mustRun("volumes", "prune", "-f", m, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 1 || out.Freed[0] != pages || !c.gone(pages) {
		t.Errorf("prune freed %v, want the removed wiki's %s", out.Freed, pages)
	}
}

// TestDefaultProjectChangeRefused is issue 26's last defaulted-project
// gap: shop/app/corral.yaml and blog/app/corral.yaml both default to
// project app and both list web. Blog, asking for another memory, used
// to change shop's container in place (the plan only noted who declared
// it). Now plan, apply and a targeted apply refuse, naming the app, its
// container, shop's manifest and the fix, and the container's config (read
// through the API) is as shop left it. An explicit project: app in blog
// (it replaced shop) makes the change go ahead.
func TestDefaultProjectChangeRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	web := func(memory string) string {
		return strings.ReplaceAll(strings.ReplaceAll(appManifest, "MEMORY", memory), "notes", "web")
	}
	shop := writeManifestIn(t, "shop/app", web("512"))
	c.mustRun("apply", "-f", shop, "--auto-approve")
	vmid := c.vmidOf(shop, "web")
	apiConfig := func() map[string]any {
		var conf map[string]any
		if err := c.pveRoot().Get(context.Background(), "/nodes/pve/lxc/"+strconv.Itoa(vmid)+"/config", nil, &conf); err != nil {
			t.Fatal(err)
		}
		return conf
	}
	before := apiConfig()

	blog := writeManifestIn(t, "blog/app", web("1024"))
	refusal := "refused: app web: container " + strconv.Itoa(vmid) + " on pve was declared by the manifest "
	for _, args := range [][]string{{"plan", "-f", blog}, {"apply", "-f", blog, "--auto-approve"}, {"apply", "-f", blog, "web", "--auto-approve"}} {
		r := c.run(args...)
		out := r.stdout + r.stderr
		if r.code != ExitError || !strings.Contains(out, refusal) || !strings.Contains(out, shop) || !strings.Contains(out, "not by this manifest (") ||
			!strings.Contains(out, "set project: explicitly in each") || !strings.Contains(out, "set project: app in this manifest") {
			t.Errorf("blog's %v: exit %d, want 1 refusing the change of shop's web\n%s", args, r.code, out)
		}
		if strings.Contains(out, "Apply complete") {
			t.Errorf("blog's %v said Apply complete:\n%s", args, out)
		}
	}
	if r := c.run("destroy", "-f", blog, "web", "--auto-approve"); r.code != ExitError || !strings.Contains(r.stdout+r.stderr, "app web (container "+strconv.Itoa(vmid)) {
		t.Errorf("blog's destroy web: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	after := apiConfig()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("shop's web changed under blog's refused commands:\nbefore %v\nafter  %v", before, after)
	}
	if fmt.Sprint(after["memory"]) != "512" {
		t.Errorf("web's memory %v, want shop's 512", after["memory"])
	}
	// Shop's own change goes ahead.
	rewrite(t, shop, web("768"))
	c.mustRun("apply", "-f", shop, "--auto-approve")
	if got := fmt.Sprint(apiConfig()["memory"]); got != "768" {
		t.Errorf("shop's own apply left memory %s, want 768", got)
	}
	// Blog says it replaced shop: an explicit project takes web over.
	rewrite(t, blog, "project: app\n"+web("1024"))
	if r := c.mustRun("apply", "-f", blog, "--auto-approve"); !strings.Contains(r.stderr, "Apply complete") {
		t.Errorf("blog with project: app:\n%s", r.stderr)
	}
	if conf := apiConfig(); fmt.Sprint(conf["memory"]) != "1024" || !strings.Contains(fmt.Sprint(conf["description"]), "corral-declared: project app") {
		t.Errorf("after blog took web over: memory %v, description %q", conf["memory"], conf["description"])
	}
}

// TestDefaultProjectRestoreReplaceRefused: blog/app/corral.yaml (project
// app by default, like shop/app's) may not restore shop's web in place of
// its container either: restore --replace is refused before anything
// changes, naming the container, shop's manifest and the fix; every
// guest's config is as it was.
func TestDefaultProjectRestoreReplaceRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	web := strings.ReplaceAll(strings.ReplaceAll(appManifest, "MEMORY", "512"), "notes", "web")
	shop := writeManifestIn(t, "shop/app", web)
	c.mustRun("apply", "-f", shop, "--auto-approve")
	vmid := c.vmidOf(shop, "web")
	b := c.backup(shop, "web")
	before := c.configs()

	blog := writeManifestIn(t, "blog/app", web)
	r := c.runC("restore", "web", "--archive", b.Archive, "--replace", "-f", blog, "--auto-approve")
	out := r.stdout + r.stderr
	if r.code != ExitError || !strings.Contains(out, "app web: container "+strconv.Itoa(vmid)+" on pve was declared by the manifest ") || !strings.Contains(out, shop) ||
		!strings.Contains(out, "set project: explicitly in each") || !strings.Contains(out, "set project: app in this manifest") {
		t.Fatalf("blog's restore --replace of shop's web: exit %d, want 1 refusing it\n%s", r.code, out)
	}
	if after := c.configs(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("guests changed under the refused restore:\nbefore %v\nafter  %v", before, after)
	}
	// Shop's own restore goes ahead.
	c.mustC("restore", "web", "--archive", b.Archive, "--replace", "-f", shop, "--auto-approve")
	if c.exists(vmid) {
		t.Errorf("shop's restore --replace left the old container %d", vmid)
	}
}
