package plan_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// projectObs is converged() with hermes in project shop, plus three more
// corral containers: app old of shop (removed from the manifest, its
// volume mounted), app blog of project other, and app legacy made before
// projects (no project tag).
func projectObs() (plan.App, *plan.Observed) {
	a := app()
	a.Project = "shop"
	obs := converged()
	obs.Apps["hermes"][0].Project = "shop"
	obs.Apps["hermes"][0].Config["tags"] = strings.Join(plan.AppTags(a), ";")
	obs.Apps["old"] = []*plan.CT{{VMID: 110, Node: "pve", Project: "shop", Status: "running",
		Config: map[string]string{"rootfs": "local-lvm:vm-110-disk-0,size=4G", "mp0": "local-lvm:vm-999-disk-2,mp=/srv/old,backup=1"}}}
	obs.Apps["blog"] = []*plan.CT{{VMID: 120, Node: "pve", Project: "other", Status: "running", Config: map[string]string{"rootfs": "local-lvm:vm-120-disk-0,size=4G"}}}
	obs.Apps["legacy"] = []*plan.CT{{VMID: 130, Node: "pve", Status: "stopped", Config: map[string]string{"rootfs": "local-lvm:vm-130-disk-0,size=4G"}}}
	k := obs.Keepers["pve"][0]
	k.Config["unused1"] = "local-lvm:vm-999-disk-2"
	k.Records[plan.VolumeKey{App: "old", Name: "data"}] = "local-lvm:vm-999-disk-2"
	k.Projects = map[string]string{"hermes": "shop", "old": "shop"}
	obs.Volumes["pve/local-lvm:vm-999-disk-2"] = 1 << 30
	return a, obs
}

func TestMake_RemovedAppIsDestroyed(t *testing.T) {
	a, obs := projectObs()
	p, err := plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges() {
		t.Fatal("no changes, want the removed app's destruction")
	}
	var got []plan.Change
	for _, c := range p.Changes {
		if c.App != "hermes" {
			got = append(got, c)
		}
	}
	if len(got) != 1 {
		t.Fatalf("changes besides hermes: %+v, want only app old's", got)
	}
	c := got[0]
	if c.App != "old" || c.Action != plan.Delete || c.OldVMID != 110 || c.Node != "pve" {
		t.Errorf("change = %+v, want delete of ct 110", c)
	}
	if len(c.Reasons) == 0 || c.Reasons[0] != "app old was removed from the manifest" {
		t.Errorf("reasons = %q", c.Reasons)
	}
	if len(c.Volumes) != 1 || c.Volumes[0].Action != plan.VolDetach || c.Volumes[0].VolID != "local-lvm:vm-999-disk-2" || c.Volumes[0].Key != "mp0" {
		t.Errorf("volumes = %+v, want data detached from mp0 and kept", c.Volumes)
	}
	for _, w := range p.Warnings {
		if strings.Contains(w, "blog") || strings.Contains(w, "app old") {
			t.Errorf("warning about another project's or a pruned container: %s", w)
		}
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "container 130 (app legacy) is managed by corral but not in this manifest, and carries no project tag") {
		t.Errorf("warnings = %q, want one about the untagged container 130", p.Warnings)
	}
}

func TestMake_RemovedAppWithUnmanagedVolumeRefused(t *testing.T) {
	a, obs := projectObs()
	obs.Apps["old"][0].Config["mp1"] = "local-lvm:vm-110-disk-1,mp=/srv/mine"
	_, err := plan.Make([]plan.App{a}, obs)
	var refused *plan.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "container 110 holds local-lvm:vm-110-disk-1 (mp1) that corral does not manage; destroying") {
		t.Fatalf("err = %v, want the unmanaged volume refused", err)
	}
}

func TestMake_OtherProjectsAppRefused(t *testing.T) {
	_, obs := projectObs()
	blog := app()
	blog.Name, blog.Project, blog.Volumes = "blog", "shop", nil
	_, err := plan.Make([]plan.App{blog}, obs)
	if err == nil || !strings.Contains(err.Error(), "app blog: container 120 on pve carries the tag corral-project-other: it is project other's app") {
		t.Fatalf("err = %v, want another project's app refused", err)
	}

	// Only the keeper's records say so: the other project's app was destroyed.
	a, obs := projectObs()
	delete(obs.Apps, "old")
	mine := app()
	mine.Name, mine.Project = "old", "mall"
	mine.Volumes[0].Name = "data"
	_, err = plan.Make([]plan.App{a, mine}, obs)
	if err == nil || !strings.Contains(err.Error(), "app old: the keeper records its volumes for project shop") {
		t.Fatalf("err = %v, want records of another project refused", err)
	}
}

func TestMake_UntaggedContainerOfTheManifestGetsTheTag(t *testing.T) {
	a, obs := projectObs()
	ct := obs.Apps["hermes"][0]
	ct.Project = ""
	ct.Config["tags"] = "corral;corral-app-hermes"
	p, err := plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Changes[0]
	if c.App != "hermes" || c.Action != plan.Update || len(c.Config) != 1 || c.Config[0].Key != "tags" || !strings.Contains(c.Config[0].New, "corral-project-shop") {
		t.Errorf("change = %+v, want the project tag added in place", c)
	}
}

func TestDestroy_OtherProjectRefused(t *testing.T) {
	_, obs := projectObs()
	_, err := plan.Destroy([]plan.App{{Name: "blog", Project: "shop"}}, obs, false)
	if err == nil || !strings.Contains(err.Error(), "container 120 carries the tag corral-project-other") {
		t.Fatalf("err = %v", err)
	}
	p, err := plan.Destroy([]plan.App{{Name: "old", Project: "shop"}}, obs, true)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Changes[0]
	if c.Action != plan.Delete || c.OldVMID != 110 || len(c.Volumes) != 1 || c.Volumes[0].Action != plan.VolDetach {
		t.Errorf("destroy of a removed app = %+v, want ct 110 deleted and its volume kept", c)
	}
}

func TestMake_RemovedAppOnOfflineNodeLeftAlone(t *testing.T) {
	a, obs := projectObs()
	obs.Nodes = append(obs.Nodes, "pve2")
	obs.Offline = []string{"pve2"}
	obs.Apps["old"][0].Node = "pve2"
	p, err := plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if c.App == "old" {
			t.Errorf("planned %v for app old on an offline node", c.Action)
		}
	}
	if !strings.Contains(strings.Join(p.Warnings, "\n"), "app old was removed from the manifest, but node pve2 is offline; container 110 is left alone") {
		t.Errorf("warnings = %q", p.Warnings)
	}
}

func TestMake_NotesProjectsOfOldRecords(t *testing.T) {
	a, obs := projectObs()
	k := obs.Keepers["pve"][0]
	k.Projects = nil // records made before projects
	p, err := plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Keepers) != 1 {
		t.Fatalf("keeper changes %+v, want one", p.Keepers)
	}
	kc := p.Keepers[0]
	// hermes is listed; old's container is tagged shop; blog and legacy
	// have no records here.
	if kc.VMID != 999 || kc.Action != plan.Update || kc.Projects["hermes"] != "shop" || kc.Projects["old"] != "shop" || len(kc.Projects) != 2 {
		t.Errorf("keeper change = %+v", kc)
	}
	if !strings.Contains(strings.Join(kc.Reasons, "\n"), "note that app old's volumes belong to project shop (the keeper recorded no project for them") {
		t.Errorf("reasons = %q", kc.Reasons)
	}
	// Once noted, nothing more to do.
	k.Projects = map[string]string{"hermes": "shop", "old": "shop"}
	p, err = plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	noted := func(p *plan.Plan) map[string]string {
		out := map[string]string{}
		for _, kc := range p.Keepers {
			for app, project := range kc.Projects {
				out[app] = project
			}
		}
		return out
	}
	if n := noted(p); len(n) != 0 {
		t.Errorf("projects noted again: %v", n)
	}
	// A record of an app of no known project, not listed: left alone.
	k.Records[plan.VolumeKey{App: "stray", Name: "x"}] = "local-lvm:vm-999-disk-9"
	if p, _ = plan.Make([]plan.App{a}, obs); len(noted(p)) != 0 {
		t.Errorf("noted a project for an app the project does not own: %v", noted(p))
	}
}

// TestOrigins_defaultedProjectTouchesOnlyItsOwn: under a project defaulted
// from the directory name, app old (removed from this manifest) is
// destroyed and its kept volume pruned only when this very manifest
// declared it; another manifest's or an unrecorded one is refused, with
// the fix. An explicit project: deletes and prunes whatever declared it.
func TestOrigins_defaultedProjectTouchesOnlyItsOwn(t *testing.T) {
	const here, there = "h:/src/shop/app/corral.yaml", "h:/src/blog/app/corral.yaml"
	for _, tc := range []struct {
		name     string
		explicit bool
		ct, kept string // the origin ct 110 records, the keeper's OriginID of old's volume
		refused  string // "": old is deleted and its volume pruned
	}{
		{"declared here", false, here, plan.OriginID(here), ""},
		{"declared by another manifest", false, there, plan.OriginID(there), "declared by the manifest " + there},
		{"declared by an unrecorded manifest", false, "", "", "declared by a manifest corral did not record"},
		{"explicit project takes another's over", true, there, plan.OriginID(there), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, obs := projectObs()
			a.Origin, a.ProjectSet = here, tc.explicit
			if tc.explicit {
				a.Origin = "project shop"
			}
			if tc.ct != "" {
				obs.Apps["old"][0].Config["description"] = plan.AppDescription(plan.App{Name: "old", Origin: tc.ct})
			}
			if tc.kept != "" {
				obs.Keepers["pve"][0].Declared = map[string]string{"old": tc.kept}
			}
			p, err := plan.Make([]plan.App{a}, obs)
			deleted := slices.ContainsFunc(p.Changes, func(c plan.Change) bool { return c.App == "old" && c.Action == plan.Delete })
			if tc.refused == "" {
				if err != nil || !deleted {
					t.Fatalf("plan: err %v, old deleted %v; want it deleted", err, deleted)
				}
			} else if err == nil || deleted || !strings.Contains(err.Error(), "app old (container 110 on pve) is not in this manifest") ||
				!strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "set project: shop in this manifest") {
				t.Fatalf("plan: err %v, old deleted %v; want it refused (%s)", err, deleted, tc.refused)
			}
			// The container is gone (a removal applied): the keeper's record decides.
			delete(obs.Apps, "old")
			fp, err := plan.Prune("shop", []plan.App{a}, obs, nil)
			freed := slices.Contains(fp.VolIDs(), "local-lvm:vm-999-disk-2")
			if tc.refused == "" {
				if err != nil || !freed {
					t.Fatalf("prune: err %v, freed %v; want old/data freed", err, freed)
				}
			} else if err == nil || freed || !strings.Contains(err.Error(), "volume old/data (local-lvm:vm-999-disk-2) was declared by") {
				t.Fatalf("prune: err %v, freed %v; want old/data refused", err, freed)
			}
		})
	}
}

// TestOrigins_defaultedProjectChangesOnlyItsOwn (issue 26): under a project
// defaulted from the directory name, a second manifest that lists app
// hermes, whose container records another manifest as its declarer, has
// every change to it refused before anything changes (an update, a
// replace that would destroy that manifest's container, a move), naming
// the app, its container, the declarer and the fix. A plan with nothing
// to change says nothing; a container that records no declarer, or an
// explicit project:, goes ahead and records this manifest.
func TestOrigins_defaultedProjectChangesOnlyItsOwn(t *testing.T) {
	const here, there = "h:/src/blog/app/corral.yaml", "h:/src/shop/app/corral.yaml"
	memory := func(a *plan.App) { a.MemoryMiB = 8192 }
	template := func(a *plan.App) { a.Template = "local:vztmpl/other.tar.zst" }
	node := func(a *plan.App) { a.Node = "pve2" }
	for _, tc := range []struct {
		name     string
		explicit bool
		ct       string // the origin ct 105 records
		edit     func(*plan.App)
		refused  bool
		want     plan.Action // of hermes when not refused
		declared string      // the origin the change records ("": none written)
	}{
		{"memory, declared here", false, here, memory, false, plan.Update, ""},
		{"memory, declared by another manifest", false, there, memory, true, 0, ""},
		{"template (a replace), declared by another manifest", false, there, template, true, 0, ""},
		{"node (a move), declared by another manifest", false, there, node, true, 0, ""},
		{"nothing to change, declared by another manifest", false, there, func(*plan.App) {}, false, plan.NoOp, ""},
		{"memory, no declarer recorded", false, "", memory, false, plan.Update, here},
		{"memory, explicit project", true, there, memory, false, plan.Update, "project app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := converged()
			obs.Nodes = []string{"pve", "pve2"}
			obs.Templates["pve2"] = []string{tmpl}
			obs.Keepers["pve2"] = []*plan.Keeper{plan.NewKeeper(998, "pve2", map[string]string{"protection": "1", "description": plan.KeeperDescription(nil)})}
			a := app()
			a.Project, a.Origin, a.ProjectSet = "app", here, tc.explicit
			if tc.explicit {
				a.Origin = "project app"
			}
			ct := obs.Apps["hermes"][0]
			ct.Project = "app"
			ct.Config["tags"] = strings.Join(plan.AppTags(a), ";")
			ct.Config["description"] = plan.AppDescription(plan.App{Name: "hermes", Template: tmpl, Origin: tc.ct})
			obs.Keepers["pve"][0].Projects = map[string]string{"hermes": "app"}
			tc.edit(&a)
			p, err := plan.Make([]plan.App{a}, obs)
			changed := p != nil && slices.ContainsFunc(p.Changes, func(c plan.Change) bool { return c.App == "hermes" && c.Action != plan.NoOp })
			if tc.refused {
				if err == nil || changed {
					t.Fatalf("plan: err %v, hermes changed %v; want every change refused", err, changed)
				}
				for _, want := range []string{"app hermes: container 105 on pve was declared by the manifest " + there, "not by this manifest (" + here + ")", "(this would ",
					"Both manifests default to project app", "set project: explicitly in each", "set project: app in this manifest"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("refusal lacks %q:\n%v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			i := slices.IndexFunc(p.Changes, func(c plan.Change) bool { return c.App == "hermes" })
			if i < 0 || p.Changes[i].Action != tc.want {
				t.Fatalf("changes %+v, want hermes %v", p.Changes, tc.want)
			}
			desc := ""
			for _, e := range p.Changes[i].Config {
				if e.Key == "description" {
					desc = e.New
				}
			}
			if got := plan.ParseMarker(desc).Declared; got != tc.declared {
				t.Errorf("the change records declarer %q, want %q", got, tc.declared)
			}
		})
	}
}
