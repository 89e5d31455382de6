package plan_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/plan"
)

const tmpl = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

func app() plan.App {
	return plan.App{
		Name: "hermes", Template: tmpl, Unprivileged: true, Cores: 2, MemoryMiB: 4096, SwapMiB: 512,
		RootStorage: "local-lvm", RootSize: 20 << 30, Nesting: true, Bridge: "vmbr0", IP: "dhcp", OnBoot: true,
		Volumes: []plan.Volume{{Name: "home", Storage: "local-lvm", Size: 10 << 30, Mount: "/home/hermes", Backup: true, Reclaim: plan.Retain}},
	}
}

// converged is the observed state right after a successful apply of app().
func converged() *plan.Observed {
	a := app()
	conf := plan.InPlaceConfig(a)
	conf["net0"] = "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth"
	conf["rootfs"] = "local-lvm:vm-105-disk-0,size=20G"
	conf["unprivileged"] = "1"
	conf["mp0"] = "local-lvm:vm-999-disk-1,mp=/home/hermes,backup=1,size=10G"
	delete(conf, "nameserver")
	return &plan.Observed{
		Nodes:     []string{"pve"},
		Templates: map[string][]string{"pve": {tmpl}},
		Apps:      map[string][]*plan.CT{"hermes": {{VMID: 105, Node: "pve", Status: "running", Config: conf}}},
		Keepers: map[string][]*plan.Keeper{"pve": {plan.NewKeeper(999, "pve", map[string]string{
			"mp0": "local-lvm:vm-999-disk-1,mp=/corral/hermes/home,size=10G", "protection": "1",
			"description": plan.KeeperDescription(map[plan.VolumeKey]string{{App: "hermes", Name: "home"}: "local-lvm:vm-999-disk-1"})})}},
		Volumes: map[string]int64{"pve/local-lvm:vm-999-disk-1": 10 << 30, "pve/local-lvm:vm-105-disk-0": 20 << 30},
	}
}

func TestMake_Create(t *testing.T) {
	obs := &plan.Observed{Nodes: []string{"pve"}, Templates: map[string][]string{"pve": {tmpl}}}
	p, err := plan.Make([]plan.App{app()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(p.Keepers), 1; got != want {
		t.Fatalf("keepers=%d, want %d", got, want)
	}
	if p.Keepers[0].Action != plan.Create {
		t.Errorf("keeper action=%v, want create", p.Keepers[0].Action)
	}
	c := p.Changes[0]
	if c.Action != plan.Create || !c.Start || c.Node != "pve" || c.FetchTemplate {
		t.Errorf("change=%+v", c)
	}
	if got, want := c.Volumes[0].Action, plan.VolCreate; got != want {
		t.Errorf("volume action=%v, want %v", got, want)
	}
}

func TestMake_NoChanges(t *testing.T) {
	p, err := plan.Make([]plan.App{app()}, converged())
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("plan has changes: %+v", p.Changes)
	}
}

func TestMake_Changes(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*plan.App, *plan.Observed)
		action  plan.Action
		reason  string
		volume  plan.VolumeAction
		restart bool
	}{
		{"memory in place", func(a *plan.App, _ *plan.Observed) { a.MemoryMiB = 8192 }, plan.Update, "memory changes", plan.VolKeep, false},
		{"template replaces", func(a *plan.App, _ *plan.Observed) {
			a.Template = "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst"
		}, plan.Replace, "template changes", plan.VolAttach, false},
		{"unprivileged replaces", func(a *plan.App, _ *plan.Observed) { a.Unprivileged = false }, plan.Replace, "unprivileged changes", plan.VolAttach, false},
		{"stopped is started", func(_ *plan.App, o *plan.Observed) { o.Apps["hermes"][0].Status = "stopped" }, plan.Update, "container is stopped", plan.VolKeep, false},
		{"mount path change restarts", func(a *plan.App, _ *plan.Observed) { a.Volumes[0].Mount = "/data" }, plan.Update, "volume home: remount", plan.VolRemount, true},
		{"volume grows", func(a *plan.App, _ *plan.Observed) { a.Volumes[0].Size = 20 << 30 }, plan.Update, "volume home: grow", plan.VolGrow, false},
		{"rootfs grows", func(a *plan.App, _ *plan.Observed) { a.RootSize = 30 << 30 }, plan.Update, "rootfs grows to 30 GiB", plan.VolKeep, false},
		{"nesting off needs restart", func(a *plan.App, _ *plan.Observed) { a.Nesting = false }, plan.Update, "features changes", plan.VolKeep, true},
		{"detached volume attached", func(_ *plan.App, o *plan.Observed) { delete(o.Apps["hermes"][0].Config, "mp0") }, plan.Update, "volume home: attach", plan.VolAttach, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, obs := app(), converged()
			tt.edit(&a, obs)
			p, err := plan.Make([]plan.App{a}, obs)
			if err != nil {
				t.Fatal(err)
			}
			c := p.Changes[0]
			if c.Action != tt.action {
				t.Fatalf("action=%v, want %v (reasons %q)", c.Action, tt.action, c.Reasons)
			}
			if !containsPrefix(c.Reasons, tt.reason) {
				t.Errorf("reasons=%q, want one starting %q", c.Reasons, tt.reason)
			}
			if got := c.Volumes[0].Action; got != tt.volume {
				t.Errorf("volume action=%v, want %v", got, tt.volume)
			}
			if c.Restart != tt.restart {
				t.Errorf("restart=%v, want %v", c.Restart, tt.restart)
			}
			if c.Volumes[0].VolID != "local-lvm:vm-999-disk-1" {
				t.Errorf("volid=%q: a replace must keep the volume", c.Volumes[0].VolID)
			}
		})
	}
}

func TestMake_Refused(t *testing.T) {
	tests := []struct {
		name string
		edit func(*plan.App, *plan.Observed)
		want string
	}{
		{"volume shrink", func(a *plan.App, _ *plan.Observed) { a.Volumes[0].Size = 5 << 30 },
			"app hermes: volume home cannot shrink from 10 GiB to 5 GiB (PVE: unable to shrink disk size); set size to 10G or more"},
		{"rootfs shrink", func(a *plan.App, _ *plan.Observed) { a.RootSize = 8 << 30 },
			"app hermes: rootfs cannot shrink from 20 GiB to 8 GiB (PVE: unable to shrink disk size); set rootfs.size to 20G or more"},
		{"storage move", func(a *plan.App, _ *plan.Observed) { a.Volumes[0].Storage = "other" },
			"app hermes: volume home is on storage local-lvm (local-lvm:vm-999-disk-1); the manifest says other: moving a retained volume between storages is not done implicitly — set storage: local-lvm"},
		{"volume lost outside corral", func(_ *plan.App, o *plan.Observed) { delete(o.Volumes, "pve/local-lvm:vm-999-disk-1") },
			"app hermes: volume home is recorded as local-lvm:vm-999-disk-1, which no longer exists on node pve: it was removed outside corral; corral will not silently create an empty one — remove the volume from the manifest or restore it"},
		{"two containers", func(_ *plan.App, o *plan.Observed) {
			o.Apps["hermes"] = append(o.Apps["hermes"], &plan.CT{VMID: 106, Node: "pve", Status: "stopped", Config: map[string]string{}})
		}, "app hermes: 2 containers carry its tag corral-app-hermes (CT 105 on pve, CT 106 on pve), and corral cannot tell which one is the app's (one was copied, or tagged, outside corral): " +
			"remove the tag from the ones that are not (in the web UI, or pct set VMID --tags …), or destroy them if nothing on them is needed, then plan again"},
		{"unknown node", func(a *plan.App, _ *plan.Observed) { a.Node = "pve9" }, `app hermes: node "pve9" does not exist (nodes: pve)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, obs := app(), converged()
			tt.edit(&a, obs)
			p, err := plan.Make([]plan.App{a}, obs)
			var re *plan.RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err=%v, want *RefusedError", err)
			}
			if diff := cmp.Diff([]string{tt.want}, re.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			// A refused app shows no change above its refusal (issue 26:
			// "app crash: no container; no changes" above the refusal).
			for _, c := range p.Changes {
				if c.App == a.Name {
					t.Errorf("the refused app's change is in the plan: %+v", c)
				}
			}
		})
	}
}

func TestMake_KeeperRepair(t *testing.T) {
	obs := converged()
	conf := obs.Keepers["pve"][0].Config
	conf["protection"] = "0"
	// The web UI removed the record's mount point (PVE keeps the volume as
	// unusedN) and someone edited the Notes.
	delete(conf, "mp0")
	conf["unused0"] = "local-lvm:vm-999-disk-1"
	conf["description"] += "corral-volume: hermes/cache=local-lvm:vm-999-disk-2\n"
	obs.Keepers["pve"][0] = plan.NewKeeper(999, "pve", conf)
	p, err := plan.Make([]plan.App{app()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	home := plan.VolumeKey{App: "hermes", Name: "home"}
	if len(p.Keepers) != 1 || !p.Keepers[0].Protect || !p.Keepers[0].Notes || p.Keepers[0].Remount[home] != "local-lvm:vm-999-disk-1" || len(p.Keepers[0].Remount) != 1 {
		t.Fatalf("keepers=%+v", p.Keepers)
	}
	if got := p.Changes[0].Volumes[0]; got.Action != plan.VolKeep || got.VolID != "local-lvm:vm-999-disk-1" {
		t.Errorf("volume change=%+v, want keep of vm-999-disk-1 (its record is still known from the Notes)", got)
	}
}

func TestMake_Warnings(t *testing.T) {
	obs := converged()
	obs.Keepers["pve"][0].Config["unused1"] = "local-lvm:vm-999-disk-7"
	obs.Apps["old"] = []*plan.CT{{VMID: 120, Node: "pve", Status: "stopped"}}
	p, err := plan.Make([]plan.App{app()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"container 120 (app old) is managed by corral but not in this manifest; it is left alone",
		"keeper 999 on pve holds local-lvm:vm-999-disk-7 (unused1) recorded for no app: orphaned, kept; inspect it with 'corral volumes'",
	}
	if diff := cmp.Diff(want, p.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// TestMake_warnsVolumeOwnersOnPrivilegeChange: a replace that flips
// unprivileged keeps the volumes, whose files PVE never shifts.
func TestMake_warnsVolumeOwnersOnPrivilegeChange(t *testing.T) {
	tests := []struct {
		name         string
		unprivileged bool // the manifest's
		was          string
		want         string
	}{
		{"to privileged", false, "1", "app hermes becomes privileged: the files on its volumes keep the shifted ids"},
		{"to unprivileged", true, "0", "app hermes becomes unprivileged: the files on its volumes keep the ids a privileged container wrote"},
		{"unchanged", true, "1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, obs := app(), converged()
			a.Unprivileged = tt.unprivileged
			obs.Apps["hermes"][0].Config["unprivileged"] = tt.was
			p, err := plan.Make([]plan.App{a}, obs)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, w := range p.Warnings {
				if strings.Contains(w, "files on its volumes") {
					got = w
				}
			}
			if tt.want == "" && got != "" || !strings.HasPrefix(got, tt.want) {
				t.Errorf("warnings %q, want one starting %q", p.Warnings, tt.want)
			}
		})
	}
}

func TestDestroy(t *testing.T) {
	a := app()
	a.Volumes = append(a.Volumes, plan.Volume{Name: "cache", Storage: "local-lvm", Size: 1 << 30, Mount: "/c", Reclaim: plan.DeleteOnDrop})
	obs := converged()
	obs.Keepers["pve"][0].Records[plan.VolumeKey{App: "hermes", Name: "cache"}] = "local-lvm:vm-999-disk-2"
	for _, del := range []bool{false, true} {
		p, err := plan.Destroy([]plan.App{a}, obs, del)
		if err != nil {
			t.Fatal(err)
		}
		c := p.Changes[0]
		if c.Action != plan.Delete || c.OldVMID != 105 {
			t.Fatalf("change=%+v", c)
		}
		got := map[string]plan.VolumeAction{}
		for _, v := range c.Volumes {
			got[v.Name] = v.Action
		}
		want := map[string]plan.VolumeAction{"home": plan.VolDetach, "cache": plan.VolDetach}
		if del {
			want["cache"] = plan.VolFree
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("deleteVolumes=%v (-want +got):\n%s", del, diff)
		}
	}
}

func TestMarkers_RoundTrip(t *testing.T) {
	a := app()
	a.Description = "Hermes agent"
	m := plan.ParseMarker(plan.AppDescription(a))
	if m.App != "hermes" || m.Template != tmpl {
		t.Errorf("marker=%+v", m)
	}
	recs := map[plan.VolumeKey]string{{App: "a", Name: "x"}: "local-lvm:vm-999-disk-0", {App: "b", Name: "y"}: "local-lvm:vm-999-disk-3"}
	if diff := cmp.Diff(recs, plan.ParseKeeperRecords(plan.KeeperDescription(recs))); diff != "" {
		t.Error(diff)
	}
}

func containsPrefix(list []string, p string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func TestMake_PinnedVMIDTaken(t *testing.T) {
	obs := &plan.Observed{Nodes: []string{"pve"}, Templates: map[string][]string{"pve": {tmpl}},
		Others: map[int]plan.Guest{105: {VMID: 105, Node: "pve", Type: "lxc", Name: "hermes-old"}}}
	a := app()
	a.VMID = 105
	_, err := plan.Make([]plan.App{a}, obs)
	var refused *plan.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(refused.Problems[0], "vmid 105 is taken by lxc 105 (hermes-old)") {
		t.Fatalf("err = %v", err)
	}
	a.VMID = 0
	if _, err := plan.Make([]plan.App{a}, obs); err != nil {
		t.Fatalf("unpinned vmid: %v", err)
	}
}

// A container that owns a volume corral does not manage is never
// destroyed, neither by a replace nor by destroy: PVE would free it.
func TestUnmanagedVolumeBlocksDestroy(t *testing.T) {
	for _, key := range []string{"mp1", "unused0"} {
		t.Run(key, func(t *testing.T) {
			obs := converged()
			obs.Apps["hermes"][0].Config[key] = "local-lvm:vm-105-disk-3,mp=/srv/extra"
			a := app()
			a.Template = "local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst"
			obs.Templates["pve"] = append(obs.Templates["pve"], a.Template)
			_, err := plan.Make([]plan.App{a}, obs)
			var refused *plan.RefusedError
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), "holds local-lvm:vm-105-disk-3 ("+key+") that corral does not manage; replacing") {
				t.Fatalf("replace: err = %v", err)
			}
			_, err = plan.Destroy([]plan.App{app()}, obs, false)
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), "destroying the container would free it") {
				t.Fatalf("destroy: err = %v", err)
			}
			// A volume owned by another guest (the keeper's) is no obstacle.
			obs.Apps["hermes"][0].Config[key] = "local-lvm:vm-999-disk-1,mp=/srv/extra"
			if _, err := plan.Destroy([]plan.App{app()}, obs, false); err != nil {
				t.Fatalf("destroy with a keeper volume: %v", err)
			}
		})
	}
}

// A keeper holds at most MaxKeeperVolumes volumes and as many records as
// fit in PVE's 8192-character description; more volumes get one more
// keeper on the node.
func TestMake_KeeperFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		fill func(k *plan.Keeper)
	}{
		{"unused entries", func(k *plan.Keeper) {
			for i := 1; i < plan.MaxKeeperVolumes; i++ {
				k.Config["unused"+strconv.Itoa(i)] = "local-lvm:vm-999-disk-" + strconv.Itoa(i+1)
				k.Records[plan.VolumeKey{App: "other", Name: "v" + strconv.Itoa(i)}] = "local-lvm:vm-999-disk-" + strconv.Itoa(i+1)
			}
		}},
		{"description", func(k *plan.Keeper) {
			for i := 0; i < 78; i++ {
				name := strings.Repeat("x", 30) + strconv.Itoa(i)
				k.Records[plan.VolumeKey{App: strings.Repeat("a", 30), Name: name}] = "local-lvm:vm-999-disk-" + strconv.Itoa(i+2)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := converged()
			tc.fill(obs.Keepers["pve"][0])
			a := app()
			a.Volumes = append(a.Volumes, plan.Volume{Name: "more", Storage: "local-lvm", Size: 1 << 30, Mount: "/srv/more", Reclaim: plan.Retain})
			p, err := plan.Make([]plan.App{a}, obs)
			if err != nil {
				t.Fatal(err)
			}
			var creates int
			for _, k := range p.Keepers {
				if k.Action == plan.Create {
					creates++
					if !strings.Contains(k.Reasons[0], "full") {
						t.Errorf("reason %q", k.Reasons[0])
					}
				}
			}
			if creates != 1 {
				t.Fatalf("keeper changes %+v, want one new keeper", p.Keepers)
			}
		})
	}
	// With room, no new keeper.
	obs := converged()
	a := app()
	a.Volumes = append(a.Volumes, plan.Volume{Name: "more", Storage: "local-lvm", Size: 1 << 30, Mount: "/srv/more", Reclaim: plan.Retain})
	if p, err := plan.Make([]plan.App{a}, obs); err != nil || len(p.Keepers) != 0 {
		t.Fatalf("keepers %+v, err %v", p.Keepers, err)
	}
}

// The host key corral pins in the description is not drift, and an
// in-place description change keeps it.
func TestMake_HostKeyPinKept(t *testing.T) {
	obs := converged()
	ct := obs.Apps["hermes"][0]
	const key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	ct.Config["description"] = plan.WithHostKey(ct.Config["description"], key)
	p, err := plan.Make([]plan.App{app()}, obs)
	if err != nil || p.HasChanges() {
		t.Fatalf("pinned key seen as drift: %+v %v", p.Changes, err)
	}
	a := app()
	a.Description = "new words"
	p, err = plan.Make([]plan.App{a}, obs)
	if err != nil {
		t.Fatal(err)
	}
	var desc string
	for _, e := range p.Changes[0].Config {
		if e.Key == "description" {
			desc = e.New
		}
	}
	if m := plan.ParseMarker(desc); m.HostKey != key || !strings.Contains(desc, "new words") {
		t.Fatalf("description edit %q lost the pin", desc)
	}
}

// An app on an offline node is left alone (its volumes cannot be seen, so
// planning it could take them for lost); the others are planned.
func TestMake_OfflineNode(t *testing.T) {
	obs := converged()
	obs.Nodes = []string{"pve", "pve2"}
	obs.Offline = []string{"pve"}
	obs.Templates["pve2"] = []string{tmpl}
	other := app()
	other.Name, other.Volumes = "other", nil
	p, err := plan.Make([]plan.App{app(), other}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Changes[0]; c.App != "hermes" || c.Action != plan.NoOp {
		t.Errorf("app on the offline node: %+v", c)
	}
	if c := p.Changes[1]; c.App != "other" || c.Action != plan.Create || c.Node != "pve2" {
		t.Errorf("new app should go to the online node: %+v", c)
	}
	if len(p.Warnings) == 0 || !strings.Contains(p.Warnings[0], "node pve is offline") {
		t.Errorf("warnings %v", p.Warnings)
	}
	d, err := plan.Destroy([]plan.App{app()}, obs, false)
	if err != nil {
		t.Fatal(err)
	}
	if d.Changes[0].Action != plan.NoOp || d.Changes[0].OldVMID != 0 {
		t.Errorf("destroy on an offline node: %+v", d.Changes[0])
	}
}

// A template the node lacks is downloaded first, and the plan says so.
func TestMake_TemplateDownloadIsShown(t *testing.T) {
	obs := &plan.Observed{Nodes: []string{"pve"}, Templates: map[string][]string{"pve": {}}}
	p, err := plan.Make([]plan.App{app()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Changes[0]
	if !c.FetchTemplate || !strings.Contains(strings.Join(c.Reasons, "\n"), "is not on node pve: it is downloaded first") {
		t.Errorf("change=%+v", c)
	}
}
