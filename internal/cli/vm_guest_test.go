package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// vmGuestManifest is a VM app with the agent and DHCP (its address is
// the agent's), user admin, the given provision steps and a health
// check that the first step's file exists.
func vmGuestManifest(t *testing.T, steps string) string {
	return writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    ssh: {publicKeys: [\""+vmKey+"\"]}\n"+
		"    vm: {disk: {size: 2G}, user: admin}\n    provision:\n"+steps+
		"    health:\n      - name: marker\n        command: test -s /srv/who\n")
}

// vmGuestSteps: a run step that records who it runs as and appends to a
// log each time it runs, and a file step with content.
func vmGuestSteps(content string) string {
	return "      - name: who\n        run: |\n          id -u > /srv/who\n          echo vm-step-ran\n          echo run >> /srv/runs\n" +
		"      - file: {path: /etc/web/app.conf, content: \"" + content + "\\n\"}\n"
}

// newVMGuestCluster is newGuestCluster with the CTs in the unisolated
// view even where LXC could run them (CI keeps the machine's runtime for
// this package), so that its VMs get the view's guests, which SSH
// reaches without QEMU (guest.ViewVMs).
func newVMGuestCluster(t *testing.T) *cluster {
	t.Helper()
	return newGuestCluster(t, pvetest.ViewRuntime())
}

// vmHealth is the health status of the manifest's one app.
func (c *cluster) vmHealth(m string) (string, string) {
	c.t.Helper()
	r := c.mustRun("status", "-f", m, "-o", "json")
	var st struct {
		Apps []struct {
			Health string `json:"health"`
			Detail string `json:"health_detail"`
		} `json:"apps"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st.Apps) != 1 {
		c.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	return st.Apps[0].Health, st.Apps[0].Detail
}

// TestVMAppProvision (issue 34): apply of a kind: vm app with provision
// steps and a health check logs into the emulator's VM guest over SSH,
// as the cloud-init user through sudo, at the address the guest agent
// reports, and runs them there; status shows the app healthy; a
// re-apply runs nothing, a changed step runs again alone, a failing
// step fails the apply with its output, and a VM whose host key changed
// behind corral's back is refused.
func TestVMAppProvision(t *testing.T) {
	t.Parallel()
	c := newVMGuestCluster(t)
	c.offerVMImage()
	// The address comes from the agent, which the operator role may
	// not ask by default (doctor's preflight says so).
	if err := c.srv.Cluster().UpdateRole(model.OperatorRole, []string{"VM.GuestAgent.Audit"}, true); err != nil {
		t.Fatal(err)
	}
	m := vmGuestManifest(t, vmGuestSteps("a=1"))
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "provisioned over SSH as admin") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("apply", "-f", m, "--auto-approve")
	needGuestExec(t, r.stderr)
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "vm-step-ran") {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vmid, _, ip := c.vmOf(m)
	vms := c.srv.Guests().ViewVMs()
	if vms == nil {
		t.Fatal("the test emulator's VMs have no view guests")
	}
	guestFile := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(vms.Root(vmid), p))
		if err != nil {
			t.Fatalf("the guest's /%s: %v", p, err)
		}
		return string(b)
	}
	if who, conf := guestFile("srv/who"), guestFile("etc/web/app.conf"); who != "0\n" || conf != "a=1\n" {
		t.Fatalf("guest files: who %q, app.conf %q", who, conf)
	}
	if model.GuestAddress(c.srv.Guests().Block(), vmid) != ip {
		t.Fatalf("status shows address %q, the agent reports the guest at %s", ip, model.GuestAddress(c.srv.Guests().Block(), vmid))
	}
	if h, d := c.vmHealth(m); h != "healthy" {
		t.Fatalf("health %s (%s)", h, d)
	}
	// A re-apply: nothing to do, nothing run.
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("second plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if runs := guestFile("srv/runs"); runs != "run\n" {
		t.Fatalf("after a re-apply the first step ran %d times", strings.Count(runs, "run"))
	}
	// A changed step runs again, alone.
	m = vmGuestManifest(t, vmGuestSteps("a=2"))
	r = c.mustRun("apply", "-f", m, "--auto-approve")
	if !strings.Contains(r.stdout+r.stderr, "who (unchanged, skipped)") || guestFile("etc/web/app.conf") != "a=2\n" || guestFile("srv/runs") != "run\n" {
		t.Fatalf("the changed step: app.conf %q, runs %q\n%s%s", guestFile("etc/web/app.conf"), guestFile("srv/runs"), r.stdout, r.stderr)
	}
	vmAppRekeyed(t, c, vmid, m)
	vmAppFailingStep(t, c, vmGuestSteps("a=2"))
	vmAppHostKeyChanged(t, c, vmid, m)
}

// vmAppRekeyed: a new key in ssh.publicKeys changes the VM's cloud-init
// data, so it restarts and cloud-init makes new host keys: apply logs in
// right after, trusting the new key, and pins it; the next apply finds
// nothing to do.
func vmAppRekeyed(t *testing.T, c *cluster, vmid int, m string) {
	t.Helper()
	_, other, err := guest.NewKey("other@test")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	m2 := writeManifest(t, strings.Replace(string(raw), vmKey, vmKey+"\", \""+other, 1))
	before := c.pinnedVMKey(vmid)
	r := c.mustRun("apply", "-f", m2, "--auto-approve")
	if after := c.pinnedVMKey(vmid); after == before || after == "" {
		t.Fatalf("host key pin %q → %q after the cloud-init change\n%s%s", before, after, r.stdout, r.stderr)
	}
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after the re-key: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// pinnedVMKey is the host key VM vmid's Notes pin.
func (c *cluster) pinnedVMKey(vmid int) string {
	c.t.Helper()
	conf, err := c.pveRoot().VMConfigOf(context.Background(), "pve", vmid, true)
	if err != nil {
		c.t.Fatal(err)
	}
	return plan.ParseMarker(conf.Values["description"]).HostKey
}

// vmAppFailingStep: a step that fails fails the apply with its output.
func vmAppFailingStep(t *testing.T, c *cluster, steps string) {
	t.Helper()
	bad := vmGuestManifest(t, steps+"      - run: |\n          echo boom-output >&2\n          exit 3\n")
	r := c.run("apply", "-f", bad, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "boom-output") || !strings.Contains(r.stderr, "exited with status 3") {
		t.Fatalf("apply of a failing step: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// vmAppHostKeyChanged: VM vmid's host keys are replaced behind corral's
// back (gone, and the VM restarted: its sshd makes a new one); apply
// refuses to log in.
func vmAppHostKeyChanged(t *testing.T, c *cluster, vmid int, m string) {
	t.Helper()
	root := c.srv.Guests().ViewVMs().Root(vmid)
	keys, _ := filepath.Glob(filepath.Join(root, "etc", "ssh", "ssh_host_*"))
	for _, k := range keys {
		if err := os.Remove(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	pc := c.pveRoot()
	for _, op := range []func() (string, error){
		func() (string, error) { return pc.StopVM(ctx, "pve", vmid) },
		func() (string, error) { return pc.StartVM(ctx, "pve", vmid) },
	} {
		upid, err := op()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pc.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "the VM's SSH host key changed since corral pinned it") {
		t.Fatalf("apply after the host key changed: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
