package cli

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/vmrun"
	"github.com/corralhq/corral/internal/testenv"
)

// TestVMAppRealBoot (issue 34) applies a kind: vm app on the emulator's
// real VMs: the VM boots the cached Debian 12 image (its disk imported
// from local:import/debian-12-corral-vm.qcow2), cloud-init configures
// it from the drive corral's config makes, and apply waits until its
// guest agent reports an address by DHCP, which status then shows;
// corral logs in there over SSH (the VM's port 22 forwarded at that
// address) as the cloud-init user, runs a provision step through sudo
// and the health check, which status runs again; destroy shuts it down
// through the agent and frees its disks. Minutes
// under TCG, so it runs only with CORRAL_TEST_FULL=1 or
// CORRAL_REQUIRE_KVM=1, as the emulator's own real boot does.
func TestVMAppRealBoot(t *testing.T) {
	if !testenv.Full() && !testenv.KVM.Required() {
		t.Skip("boots a real VM (minutes without KVM); CORRAL_TEST_FULL=1 or CORRAL_REQUIRE_KVM=1 runs it")
	}
	// A boot under TCG takes both cores for minutes (and the image's
	// build as long): alone, not beside the other real boot or the
	// real-template tests.
	testenv.HoldMachineAlone(t)
	if _, ok := vmrun.CachedImage(); !ok {
		// Built once per machine (about 80 s; a build under way in
		// another test process is waited for through its lock file).
		if _, err := vmrun.EnsureImage(context.Background(), io.Discard); err != nil {
			testenv.Lackf(t, testenv.KVM, "the VM image cannot be built here: %v", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := newCluster(t, func(o *sim.Options) { o.RealVMs, o.GuestSSHPort = true, port })
	registerGuestPort(t, c.srv.URL(), port)
	if err := c.srv.Cluster().UpdateRole(model.OperatorRole, []string{"VM.GuestAgent.Audit"}, true); err != nil {
		t.Fatal(err)
	}
	m := writeManifest(t, "apps:\n  - name: web\n    kind: vm\n    memory: 768\n"+
		"    ssh: {publicKeys: [\""+vmKey+"\"]}\n    vm: {disk: {size: 2G}, addressWait: 8m}\n"+
		"    provision:\n      - run: |\n          id -u > /var/tmp/corral-who\n          echo real-vm-step-ran\n"+
		"    health:\n      - command: grep -qx 0 /var/tmp/corral-who\n")
	began := time.Now()
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 {
		if strings.Contains(r.stderr, "501") {
			// The imported disk has the image file's size, under the
			// 1G least a manifest asks, so apply grows it; branch
			// h3-vmsim adds the emulator's qemu resize (issue 34).
			t.Skipf("the emulator answers no PUT …/qemu/{vmid}/resize yet:\n%s", r.stderr)
		}
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout+r.stderr, "real-vm-step-ran") {
		t.Fatalf("apply ran no provision step in the VM:\n%s%s", r.stdout, r.stderr)
	}
	t.Logf("apply (create, boot, the agent's address, provisioning) took %s", time.Since(began).Round(time.Second))
	if h, d := c.vmHealth(m); h != "healthy" {
		t.Fatalf("health %s (%s)", h, d)
	}
	vmid, status, ip := c.vmOf(m)
	if status != "running" || ip == "" {
		t.Fatalf("vm %d: %s, address %q; want running with the agent's address", vmid, status, ip)
	}
	t.Logf("vm %d reports %s through its guest agent", vmid, ip)
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after the boot: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("destroy", "-f", m, "--auto-approve")
	if _, err := c.pveRoot().VMConfigOf(context.Background(), "pve", vmid, true); err == nil || !strings.Contains(err.Error(), "not") {
		t.Fatalf("vm %d after destroy: %v", vmid, err)
	}
}
