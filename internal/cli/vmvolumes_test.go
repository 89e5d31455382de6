package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// vmVolManifest is VM app web pinned to vmid, with a retained volume
// data (reclaim: delete) and logs (retained).
func vmVolManifest(t *testing.T, vmid string) string {
	return writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    vmid: "+vmid+"\n    memory: 512\n"+
		"    network: {ip: 10.20.0.60/24, gateway: 10.20.0.1}\n    ssh: {publicKeys: [\""+vmKey+"\"]}\n"+
		"    vm: {disk: {size: 2G}}\n"+
		"    volumes:\n      - {name: data, size: 1G, reclaim: delete}\n      - {name: logs, size: 512M}\n")
}

// vmVolumes is status -o json's volumes of app web, by name.
func (c *cluster) vmVolumes(m string) map[string]plan.VolumeInfo {
	c.t.Helper()
	r := c.mustRun("status", "-f", m, "-o", "json")
	var st struct {
		Apps []struct {
			Volumes []plan.VolumeInfo `json:"volumes"`
		} `json:"apps"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Apps) != 1 {
		c.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	out := map[string]plan.VolumeInfo{}
	for _, v := range st.Apps[0].Volumes {
		if _, dup := out[v.Name]; dup {
			c.t.Fatalf("volume %s listed twice: %s", v.Name, r.stdout)
		}
		out[v.Name] = v
	}
	return out
}

// diskBytes reads (data == nil) or writes the start of volid's file on
// the emulator's storage, as a guest's filesystem would hold it.
func (c *cluster) diskBytes(volid string, data []byte) []byte {
	return c.diskBytesOn("pve", volid, data)
}

// diskBytesOn is diskBytes for a volume on node.
func (c *cluster) diskBytesOn(node, volid string, data []byte) []byte {
	c.t.Helper()
	path, err := c.srv.Cluster().VolumePath(node, volid)
	if err != nil {
		c.t.Fatal(err)
	}
	if data != nil {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteAt(data, 0)
			f.Close()
		}
		if err != nil {
			c.t.Fatal(err)
		}
		return data
	}
	f, err := os.Open(path)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 16)
	if _, err := f.ReadAt(b, 0); err != nil {
		c.t.Fatal(err)
	}
	return b
}

// TestVMAppVolumesSurviveReplace (issue 34): a VM app's volumes are
// allocated on the node's keeper VM and attached to its VM before the
// first start; a replace (a new vmid) detaches them to the keeper VM
// before the old VM's destroy and attaches the same disks, bytes and
// serials to the new VM; destroy keeps them on the keeper VM, and
// destroy --delete-volumes frees the reclaim: delete one only.
func TestVMAppVolumesSurviveReplace(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := vmVolManifest(t, "150")
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "volume data: new 1 GiB disk on local-lvm, owned by the keeper VM on pve") ||
		!strings.Contains(r.stdout, "a keeper VM is created on node pve") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	vols := c.vmVolumes(m)
	data, logs := vols["data"], vols["logs"]
	if data.HolderVMID != 150 || logs.HolderVMID != 150 || data.Serial != plan.VMVolumeSerial("web", "data") || data.Size != 1<<30 {
		t.Fatalf("after apply the volumes are %+v", vols)
	}
	c.diskBytes(data.VolID, []byte("web's data 12345"))
	c.diskBytes(logs.VolID, []byte("web's logs 67890"))
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("second plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	m2 := vmVolManifest(t, "151")
	r = c.run("plan", "-f", m2)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "volume data ("+data.VolID+"): attached to the app's VM from the keeper VM") {
		t.Fatalf("plan of the replace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	ctx := context.Background()
	root := c.pveRoot()
	if _, err := root.VMConfigOf(ctx, "pve", 150, true); !pve.IsNotFound(err) {
		t.Fatalf("vm 150 after the replace: %v", err)
	}
	vols = c.vmVolumes(m2)
	for name, want := range map[string]string{"data": "web's data 12345", "logs": "web's logs 67890"} {
		v := vols[name]
		if v.HolderVMID != 151 || !strings.HasPrefix(v.Holder, "vm 151 scsi") || v.Serial != plan.VMVolumeSerial("web", name) {
			t.Fatalf("after the replace volume %s is %+v", name, v)
		}
		if got := c.diskBytes(v.VolID, nil); !bytes.Equal(got, []byte(want)) {
			t.Fatalf("volume %s (%s) holds %q after the replace, want %q", name, v.VolID, got, want)
		}
	}
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after the replace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	c.mustRun("destroy", "-f", m2, "--auto-approve")
	vols = c.vmVolumes(m2)
	keeper := vols["data"].HolderVMID
	if len(vols) != 2 || !strings.HasPrefix(vols["data"].Holder, "keeper vm ") || vols["logs"].HolderVMID != keeper {
		t.Fatalf("after destroy the volumes are %+v", vols)
	}
	kconf, err := root.VMConfigOf(ctx, "pve", keeper, true)
	if err != nil || kconf.Values["protection"] != "1" || !strings.Contains(kconf.Values["tags"], plan.TagKeeper) {
		t.Fatalf("keeper VM %d: %v %v", keeper, kconf, err)
	}
	if got := c.diskBytes(vols["data"].VolID, nil); !bytes.Equal(got, []byte("web's data 12345")) {
		t.Fatalf("data on the keeper VM holds %q", got)
	}

	c.mustRun("apply", "-f", m2, "--auto-approve")
	if got := c.vmVolumes(m2)["logs"]; got.HolderVMID != 151 || !bytes.Equal(c.diskBytes(got.VolID, nil), []byte("web's logs 67890")) {
		t.Fatalf("logs after apply again: %+v", got)
	}
	r = c.run("destroy", "-f", m2, "--delete-volumes", "--auto-approve")
	if r.code != 0 {
		t.Fatalf("destroy --delete-volumes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vols = c.vmVolumes(m2)
	if _, ok := vols["data"]; ok || len(vols) != 1 || !strings.HasPrefix(vols["logs"].Holder, "keeper vm ") {
		t.Fatalf("after destroy --delete-volumes the volumes are %+v (data is reclaim: delete, logs retained)", vols)
	}
	if kconf, err = root.VMConfigOf(ctx, "pve", keeper, true); err != nil || kconf.Values["protection"] != "1" || strings.Contains(kconf.Values["description"], "web/data") {
		t.Fatalf("keeper VM %d after the free: %v %v", keeper, kconf.Values, err)
	}
}

// TestVMKeeperTagsEditedRefused: a keeper VM whose corral-keeper tag was
// edited away is damaged, not absent: plan and apply refuse the app
// whose disks it holds, saying which VM, what it holds and the qm set
// that repairs it, and create no second keeper VM; with the tags back
// the plan is empty again.
func TestVMKeeperTagsEditedRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := vmVolManifest(t, "150")
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.mustRun("destroy", "-f", m, "--auto-approve")
	keeper := c.vmVolumes(m)["data"].HolderVMID
	ctx := context.Background()
	root := c.pveRoot()
	if err := root.UpdateVMConfig(ctx, "pve", keeper, &pve.VMConfigUpdate{Set: map[string]string{"tags": "corral;legacy"}}); err != nil {
		t.Fatal(err)
	}
	want := "keeper VM " + strconv.Itoa(keeper) + " on pve is damaged: it has tags corral;legacy (not corral-keeper)"
	for _, args := range [][]string{{"plan", "-f", m}, {"apply", "-f", m, "--auto-approve"}} {
		verb := args[0]
		r := c.run(args...)
		if r.code == 0 || !strings.Contains(r.stderr+r.stdout, want) || !strings.Contains(r.stderr+r.stdout, "qm set "+strconv.Itoa(keeper)+" --tags 'corral;corral-keeper'") ||
			!strings.Contains(r.stderr+r.stdout, "web/data") {
			t.Fatalf("%s with the keeper VM's tags edited: exit %d\n%s%s", verb, r.code, r.stdout, r.stderr)
		}
	}
	if n := c.vmCount(); n != 1 {
		t.Fatalf("the refused apply made VMs: %d, want the keeper VM alone", n)
	}
	if err := root.UpdateVMConfig(ctx, "pve", keeper, &pve.VMConfigUpdate{Set: map[string]string{"tags": "corral;corral-keeper"}}); err != nil {
		t.Fatal(err)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if v := c.vmVolumes(m)["data"]; v.HolderVMID != 150 {
		t.Fatalf("after the tags are back data is %+v", v)
	}
	// Protection left off (as a free killed in its window leaves it):
	// the plan repairs it without stopping the app's VM.
	if err := root.UpdateVMConfig(ctx, "pve", keeper, &pve.VMConfigUpdate{Delete: []string{"protection"}}); err != nil {
		t.Fatal(err)
	}
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "keeper VM "+strconv.Itoa(keeper)+" on pve has protection off: it is set again") || strings.Contains(r.stdout, "stops for its disks") {
		t.Fatalf("plan with the keeper VM unprotected: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if kconf, err := root.VMConfigOf(ctx, "pve", keeper, true); err != nil || kconf.Values["protection"] != "1" {
		t.Fatalf("keeper VM %d after the repair: %v %v", keeper, kconf, err)
	}
	if st, err := root.VMStatusOf(ctx, "pve", 150); err != nil || st.Status != "running" {
		t.Fatalf("vm 150 after the repair: %+v %v", st, err)
	}
}
