package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// vmOnlyManifest is VM app other with no volumes, in project (demo when
// "").
func vmOnlyManifest(t *testing.T, project string) string {
	text := "apps:\n  - name: other\n    kind: vm\n    vmid: 160\n    memory: 512\n" +
		"    network: {ip: 10.20.0.61/24, gateway: 10.20.0.1}\n    ssh: {publicKeys: [\"" + vmKey + "\"]}\n    vm: {disk: {size: 2G}}\n"
	if project != "" {
		text = "project: " + project + "\n" + text
	}
	return writeManifest(t, text)
}

// volumeList is corral volumes -o json, by app/name.
func (c *cluster) volumeList() map[string]plan.VolumeInfo {
	c.t.Helper()
	r := c.mustRun("volumes", "-o", "json")
	var inv struct {
		Volumes []plan.VolumeInfo `json:"volumes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &inv); err != nil {
		c.t.Fatalf("volumes -o json: %v\n%s", err, r.stdout)
	}
	out := map[string]plan.VolumeInfo{}
	for _, v := range inv.Volumes {
		out[v.App+"/"+v.Name] = v
	}
	return out
}

// TestVMVolumesListRmPrune (issue 34): corral volumes lists a VM app's
// retained disks with kind vm, on its VM and then on the keeper VM;
// volumes rm refuses a disk the app's VM holds or the manifest declares;
// prune and destroy --delete-volumes refuse, freeing nothing, while a
// snapshot of the keeper VM keeps the disks, prunes nothing for another project, and then frees them with
// the keeper VM protected again and its Notes lines gone; a keeper VM
// left unprotected is protected again by a prune with nothing to free.
// The first plan says why a keeper container comes (corral's lock).
func TestVMVolumesListRmPrune(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := vmVolManifest(t, "150")
	// A VM-only manifest still takes corral's lock in a keeper CT: the
	// plan says so, and from which template, until one is there.
	if r := c.run("plan", "-f", m); !strings.Contains(r.stdout, "node pve has no keeper container, and corral's lock lives in one") ||
		!strings.Contains(r.stdout, "from container template local:vztmpl/") {
		t.Fatalf("first plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if r := c.run("plan", "-f", vmOnlyManifest(t, "")); r.code != ExitChanges || strings.Contains(r.stdout, "no keeper container") {
		t.Fatalf("plan once the keeper CT is there: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vols := c.volumeList()
	data, logs := vols["web/data"], vols["web/logs"]
	if data.Kind != plan.KindVM || logs.Kind != plan.KindVM || data.HolderVMID != 150 || data.Serial != plan.VMVolumeSerial("web", "data") {
		t.Fatalf("volumes after apply: %+v", vols)
	}
	if r := c.run("volumes", "rm", data.VolID, "-f", m, "--auto-approve"); r.code == 0 || !strings.Contains(r.stdout, "not a volume corral keeps") || c.gone(data.VolID) {
		t.Fatalf("rm of a disk the app's VM holds: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("destroy", "-f", m, "--auto-approve")
	vols = c.volumeList()
	data, logs = vols["web/data"], vols["web/logs"]
	keeper := data.HolderVMID
	if data.Kind != plan.KindVM || data.Holder != "keeper vm "+strconv.Itoa(keeper) || logs.HolderVMID != keeper || data.Project != "demo" {
		t.Fatalf("volumes after destroy: %+v", vols)
	}
	if r := c.run("volumes", "rm", data.VolID, "-f", m, "--auto-approve"); r.code == 0 || !strings.Contains(r.stdout, "which app web declares") {
		t.Fatalf("rm of a declared disk: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	ctx := context.Background()
	root := c.pveRoot()
	upid, err := root.CreateVMSnapshot(ctx, "pve", keeper, "hold", "")
	if err == nil {
		_, err = root.WaitTask(ctx, upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	m2 := vmOnlyManifest(t, "")
	r := c.run("volumes", "prune", "-f", m2, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stdout, "snapshot hold of VM "+strconv.Itoa(keeper)) || !strings.Contains(r.stdout, "qm delsnapshot") || c.gone(data.VolID) || c.gone(logs.VolID) {
		t.Fatalf("prune with a snapshot of the keeper VM: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("destroy", "-f", m, "--delete-volumes", "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "snapshot hold of VM "+strconv.Itoa(keeper)) || c.gone(data.VolID) {
		t.Fatalf("destroy --delete-volumes with a snapshot of the keeper VM: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if kconf, err := root.VMConfigOf(ctx, "pve", keeper, true); err != nil || kconf.Values["protection"] != "1" {
		t.Fatalf("keeper VM %d after the refused free: %v %v", keeper, kconf, err)
	}
	if upid, err = root.DeleteVMSnapshot(ctx, "pve", keeper, "hold"); err == nil {
		_, err = root.WaitTask(ctx, upid, pve.WaitOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	if out := decodeFree(t, c.mustRun("volumes", "prune", "-f", vmOnlyManifest(t, "elsewhere"), "--auto-approve", "-o", "json")); len(out.Freed) != 0 || len(out.Plan.Volumes) != 0 {
		t.Fatalf("prune of another project freed %v (plan %+v)", out.Freed, out.Plan)
	}

	out := decodeFree(t, c.mustRun("volumes", "rm", logs.VolID, "-f", m2, "--auto-approve", "-o", "json"))
	if len(out.Freed) != 1 || out.Freed[0] != logs.VolID || !c.gone(logs.VolID) || c.gone(data.VolID) {
		t.Fatalf("rm of logs freed %v", out.Freed)
	}
	r = c.mustRun("volumes", "prune", "-f", m2, "--auto-approve", "-o", "json")
	if out = decodeFree(t, r); len(out.Freed) != 1 || out.Freed[0] != data.VolID || !c.gone(data.VolID) || !strings.Contains(r.stdout, `"kind": "vm"`) {
		t.Fatalf("prune freed %v\n%s", out.Freed, r.stdout)
	}
	kconf, err := root.VMConfigOf(ctx, "pve", keeper, true)
	if err != nil || kconf.Values["protection"] != "1" || strings.Contains(kconf.Values["description"], "web") {
		t.Fatalf("keeper VM %d after the frees: %v %v", keeper, kconf, err)
	}
	if vols = c.volumeList(); len(vols) != 0 {
		t.Fatalf("volumes after the frees: %+v", vols)
	}

	// Protection left off, as a free killed between its writes leaves it.
	if err := root.UpdateVMConfig(ctx, "pve", keeper, &pve.VMConfigUpdate{Delete: []string{"protection"}}); err != nil {
		t.Fatal(err)
	}
	r = c.mustRun("volumes", "prune", "-f", m2, "--auto-approve")
	if !strings.Contains(r.stdout, "keeper VM "+strconv.Itoa(keeper)+" on pve: protection set again") {
		t.Fatalf("prune with the keeper VM unprotected:\n%s%s", r.stdout, r.stderr)
	}
	if kconf, err = root.VMConfigOf(ctx, "pve", keeper, true); err != nil || kconf.Values["protection"] != "1" {
		t.Fatalf("keeper VM %d after the prune: %v %v", keeper, kconf, err)
	}
}
