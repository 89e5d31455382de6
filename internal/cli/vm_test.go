package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
)

// vmKey is the cloud-init user's key in the VM tests.
const vmKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEFzE6scGlqSWu4rJhGLAFx8rEmJPfpBTE3akDx77WGC test@corral"

// offerVMImage offers a stand-in for the emulator's cached VM image as
// local:import/<sim.ImportImageName>, as the real runtime offers the
// image (the state-only runtime boots nothing, so any qcow2-headed file
// of the image's 2 GiB will do; it is sparse here).
func (c *cluster) offerVMImage() {
	c.t.Helper()
	p := filepath.Join(c.t.TempDir(), "img.qcow2")
	f, err := os.Create(p)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := f.WriteString("QFI\xfb"); err != nil {
		c.t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		c.t.Fatal(err)
	}
	f.Close()
	if err := c.srv.Cluster().OfferImportVolume("local", sim.ImportImageName, p); err != nil {
		c.t.Fatal(err)
	}
}

// vmManifest is a VM app with a static address (its address is the
// config's, so apply waits for no agent) and memory MiB.
func vmManifest(t *testing.T, memory string) string {
	return writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    memory: "+memory+"\n    cores: 2\n"+
		"    network: {ip: 10.20.0.50/24, gateway: 10.20.0.1}\n    ssh: {publicKeys: [\""+vmKey+"\"]}\n"+
		"    vm: {disk: {size: 2G}, user: admin}\n")
}

// vmOf is the one VM the status of m lists for app web.
func (c *cluster) vmOf(m string) (vmid int, status, ip string) {
	c.t.Helper()
	r := c.mustRun("status", "-f", m, "-o", "json")
	var st struct {
		Apps []struct {
			Kind string `json:"kind"`
			VMs  []struct {
				VMID   int    `json:"vmid"`
				Status string `json:"status"`
				IP     string `json:"ip"`
			} `json:"vms"`
		} `json:"apps"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		c.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	if len(st.Apps) != 1 || st.Apps[0].Kind != "vm" || len(st.Apps[0].VMs) != 1 {
		c.t.Fatalf("status: %s", r.stdout)
	}
	v := st.Apps[0].VMs[0]
	return v.VMID, v.Status, v.IP
}

// TestVMAppLifecycle (issue 34): apply of a kind: vm app creates the VM
// with cloud-init's user and keys, the agent, net0, ipconfig0 and the
// disk imported from the image, and starts it; a second plan is empty; a
// memory change is an in-place update that restarts the VM; destroy
// removes it and frees its disks.
func TestVMAppLifecycle(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := vmManifest(t, "1024")
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "vm: 1024 MiB reserved on the host (no ballooning") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, status, ip := c.vmOf(m)
	if status != "running" || ip != "10.20.0.50" {
		t.Fatalf("vm %d: %s %s", vmid, status, ip)
	}
	ctx := context.Background()
	root := c.pveRoot()
	conf, err := root.VMConfigOf(ctx, "pve", vmid, false)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := pve.DecodeSSHKeys(conf.Values["sshkeys"])
	want := map[string]string{"ciuser": "admin", "agent": "1", "memory": "1024", "cores": "2", "balloon": "0", "ipconfig0": "ip=10.20.0.50/24,gw=10.20.0.1", "name": "web"}
	for k, v := range want {
		if conf.Values[k] != v {
			t.Errorf("%s = %q, want %q", k, conf.Values[k], v)
		}
	}
	if !slices.Equal(keys, []string{vmKey}) || !strings.Contains(conf.Values["net0"], "bridge=vmbr0") || !strings.HasPrefix(conf.Values["net0"], "virtio=") ||
		!strings.Contains(conf.Values["scsi0"], "size=2G") || !strings.Contains(conf.Values["ide2"], "cloudinit") || !strings.Contains(conf.Values["tags"], "corral-app-web") {
		t.Errorf("config: %v (keys %q)", conf.Values, keys)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("second plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m2 := vmManifest(t, "2048")
	r = c.run("plan", "-f", m2)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "memory") || strings.Contains(r.stdout, "replace") {
		t.Fatalf("plan of a memory change: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	if id, st, _ := c.vmOf(m2); id != vmid || st != "running" {
		t.Fatalf("after the update: vm %d %s, want %d running", id, st, vmid)
	}
	if conf, err = root.VMConfigOf(ctx, "pve", vmid, true); err != nil || conf.Values["memory"] != "2048" {
		t.Fatalf("memory in effect = %q, %v (the restart applies it)", conf.Values["memory"], err)
	}
	c.mustRun("destroy", "-f", m2, "--auto-approve")
	if _, err := root.VMConfigOf(ctx, "pve", vmid, true); !pve.IsNotFound(err) {
		t.Fatalf("vm %d after destroy: %v", vmid, err)
	}
	content, err := root.StorageContent(ctx, "pve", "local-lvm", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range content {
		if strings.Contains(v.VolID, "vm-"+strconv.Itoa(vmid)+"-") {
			t.Errorf("volume %s left after destroy", v.VolID)
		}
	}
}
