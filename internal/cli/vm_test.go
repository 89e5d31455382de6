package cli

import (
	"bytes"
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
	"github.com/corralhq/corral/internal/sim/model"
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
	// The app's key, and corral's own for its logins (comment "corral").
	if len(keys) != 2 || keys[0] != vmKey || !strings.HasSuffix(keys[1], " corral") || !strings.Contains(conf.Values["net0"], "bridge=vmbr0") || !strings.HasPrefix(conf.Values["net0"], "virtio=") ||
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

// narrowToken is a token whose role is the operator's without the
// privileges in drop.
func (c *cluster) narrowToken(drop ...string) string {
	c.t.Helper()
	cl := c.srv.Cluster()
	var privs []string
	for _, p := range model.OperatorPrivileges {
		if !slices.Contains(drop, p) {
			privs = append(privs, p)
		}
	}
	if err := cl.AddRole("Narrow", privs); err != nil {
		c.t.Fatal(err)
	}
	if err := cl.AddUser("narrow@pve", "", nil); err != nil {
		c.t.Fatal(err)
	}
	_, secret, _, err := cl.AddToken("narrow@pve", "tok", true, "", 0)
	if err != nil {
		c.t.Fatal(err)
	}
	root := model.Auth{UserID: "root@pam"}
	if err := cl.UpdateACL(root, model.ACLUpdate{Path: "/", Roles: []string{"Narrow"}, Users: []string{"narrow@pve"}, Tokens: []string{"narrow@pve!tok"}, Propagate: true}); err != nil {
		c.t.Fatal(err)
	}
	return "narrow@pve!tok=" + secret
}

// TestVMAppDoctorCloudinit: a token that may set neither
// VM.Config.Cloudinit nor its alternative VM.Config.Network is told so by
// doctor for a VM app (cloud-init's user, keys and address), and apply
// stops in its preflight before it creates anything.
func TestVMAppDoctorCloudinit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := vmManifest(t, "1024")
	tok := c.narrowToken("VM.Config.Network")
	r := c.runToken(tok, "doctor", "-f", m)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "VM.Config.Cloudinit") || !strings.Contains(r.stdout+r.stderr, "cloud-init") {
		t.Fatalf("doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// (c.run points plan and apply at the operator's token.)
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"apply", "-f", m, "--auto-approve", "--endpoint", c.srv.URL(), "--api-token", tok, "--fingerprint", c.srv.Fingerprint()},
		strings.NewReader(""), &out, &errb)
	if code != ExitError || !strings.Contains(errb.String(), "preflight") || !strings.Contains(errb.String(), "VM.Config.Cloudinit") {
		t.Fatalf("apply: exit %d\n%s%s", code, out.String(), errb.String())
	}
	if vms, err := c.pveRoot().ClusterResources(context.Background(), "vm"); err != nil || len(vms) > 1 {
		t.Fatalf("apply created guests: %+v, %v", vms, err)
	}
}

// TestVMAppTagsEditedRefused: a VM of corral's whose tags were edited
// away (its Notes still name the app) is refused by plan and apply, not
// adopted and not duplicated; with the tags back the app is converged.
func TestVMAppTagsEditedRefused(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := vmManifest(t, "1024")
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, _, _ := c.vmOf(m)
	ctx := context.Background()
	root := c.pveRoot()
	if err := root.UpdateVMConfig(ctx, "pve", vmid, &pve.VMConfigUpdate{Delete: []string{"tags"}}); err != nil {
		t.Fatal(err)
	}
	want := "VM " + strconv.Itoa(vmid) + " on pve carries corral's marker for app web in its Notes but not corral's tags"
	for _, cmd := range []string{"plan", "apply"} {
		r := c.run(cmd, "-f", m, "--auto-approve")
		if cmd == "plan" {
			r = c.run(cmd, "-f", m)
		}
		if r.code == 0 || r.code == ExitChanges || !strings.Contains(r.stdout+r.stderr, want) {
			t.Fatalf("%s: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
	if n := c.vmCount(); n != 1 {
		t.Fatalf("%d VMs after the refused apply, want the one", n)
	}
	if err := root.UpdateVMConfig(ctx, "pve", vmid, &pve.VMConfigUpdate{Set: map[string]string{"tags": "corral;corral-app-web;corral-project-demo"}}); err != nil {
		t.Fatal(err)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan with the tags back: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestVMAppAddressWait: with DHCP and the agent on, apply waits for the
// guest agent's address; the emulator's state-only VMs run no agent, so
// the wait ends at vm.addressWait with what to do, the VM created and
// running (a later apply has nothing to do).
func TestVMAppAddressWait(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	// State-only VMs, whose agent never answers (the view's VM guests
	// answer at once).
	c.srv.Cluster().SetVMRuntime(nil)
	// The wait asks the agent, which the emulator's operator role may
	// not by default (doctor's preflight says so).
	if err := c.srv.Cluster().UpdateRole(model.OperatorRole, []string{"VM.GuestAgent.Audit"}, true); err != nil {
		t.Fatal(err)
	}
	m := writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    vm: {disk: {size: 2G}, addressWait: 1s}\n")
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "guest agent reported no address within 1s") || !strings.Contains(r.stderr, "raise vm.addressWait") {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, status, ip := c.vmOf(m); status != "running" || ip != "" {
		t.Fatalf("vm %s with address %q", status, ip)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// vmManifestDisk is vmManifest with the disk size and a note.
func vmManifestDisk(t *testing.T, size string) string {
	return writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    memory: 1024\n"+
		"    network: {ip: 10.20.0.50/24, gateway: 10.20.0.1}\n    vm: {disk: {size: "+size+"}}\n")
}

// TestVMAppDiskGrows: a larger vm.disk.size is an in-place grow (PUT
// …/qemu/{vmid}/resize), a smaller one is refused.
func TestVMAppDiskGrows(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	c.mustRun("apply", "-f", vmManifestDisk(t, "2G"), "--auto-approve")
	m := vmManifestDisk(t, "4G")
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "disk scsi0 grows 2 GiB → 4 GiB in place") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("plan", "-f", vmManifestDisk(t, "1G")); r.code != ExitError || !strings.Contains(r.stdout, "a disk cannot shrink; set vm.disk.size to 2G or more") {
		t.Fatalf("plan of a smaller disk: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 && strings.Contains(r.stderr, "501") {
		// The emulator of this branch serves no qemu resize; branch
		// h3-vmsim adds it (issue 34), and this test then runs.
		t.Skipf("the emulator answers no PUT …/qemu/{vmid}/resize yet:\n%s", r.stderr)
	}
	if r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vmid, _, _ := c.vmOf(m)
	conf, err := c.pveRoot().VMConfigOf(context.Background(), "pve", vmid, true)
	if err != nil || !strings.Contains(conf.Values["scsi0"], "size=4G") {
		t.Fatalf("scsi0 = %q, %v", conf.Values["scsi0"], err)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after the grow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// vmCount is how many VMs the cluster lists (the lock's keeper CT, which
// holds corral's lease, is no VM).
func (c *cluster) vmCount() int {
	c.t.Helper()
	res, err := c.pveRoot().ClusterResources(context.Background(), "vm")
	if err != nil {
		c.t.Fatal(err)
	}
	n := 0
	for _, g := range res {
		if g.Type == "qemu" {
			n++
		}
	}
	return n
}

// TestVMAppBIOS: vm.bios ovmf needs VM.Config.HWType for machine q35
// (the preflight says so before any change); it creates the VM with bios
// ovmf, machine q35 and an EFI vars disk on its disk's storage (the
// 4 MiB vars with pre-enrolled keys, one LVM extent), which a second
// plan leaves alone; back to seabios the plan recreates the VM, and
// destroy frees the EFI disk with the others.
func TestVMAppBIOS(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	manifestWith := func(bios string) string {
		return writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    memory: 1024\n"+
			"    network: {ip: 10.20.0.50/24, gateway: 10.20.0.1}\n    vm: {disk: {size: 2G}, bios: "+bios+"}\n")
	}
	m := manifestWith("ovmf")
	if r := c.run("plan", "-f", m); r.code != ExitChanges || !strings.Contains(r.stdout, "bios: ovmf (machine q35, EFI vars disk efidisk0 on local-lvm)") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.run("apply", "-f", m, "--auto-approve"); r.code == 0 || !strings.Contains(r.stderr, "VM.Config.HWType on /vms (needed to set machine q35 of the vm of app web)") {
		t.Fatalf("apply without VM.Config.HWType: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := c.srv.Cluster().UpdateRole(model.OperatorRole, []string{"VM.Config.HWType"}, true); err != nil {
		t.Fatal(err)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, status, _ := c.vmOf(m)
	ctx := context.Background()
	root := c.pveRoot()
	conf, err := root.VMConfigOf(ctx, "pve", vmid, true)
	if err != nil {
		t.Fatal(err)
	}
	efi := conf.Values["efidisk0"]
	if status != "running" || conf.Values["bios"] != "ovmf" || conf.Values["machine"] != "q35" ||
		!strings.HasPrefix(efi, "local-lvm:vm-"+strconv.Itoa(vmid)+"-disk-") || !strings.HasSuffix(efi, ",efitype=4m,ms-cert=2023k,pre-enrolled-keys=1,size=4M") ||
		!strings.Contains(conf.Values["boot"], "scsi0") || strings.Contains(conf.Values["boot"], "efidisk0") {
		t.Fatalf("vm %d %s: bios %q machine %q efidisk0 %q boot %q", vmid, status, conf.Values["bios"], conf.Values["machine"], efi, conf.Values["boot"])
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("second plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	back := manifestWith("seabios")
	if r := c.run("plan", "-f", back); r.code != ExitChanges || !strings.Contains(r.stdout, "bios ovmf → seabios") {
		t.Fatalf("plan back to seabios: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("destroy", "-f", m, "--auto-approve")
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
