package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// vmHAManifest is a VM app pinned to pve1 with ha:, its disk on %s; %s
// are more ha: keys.
const vmHAManifest = `project: vmha
apps:
  - name: web
    kind: vm
    node: pve1
    memory: 512
    network: {ip: 10.20.0.52/24, gateway: 10.20.0.1}
    vm: {disk: {storage: %s, size: 2G}}
    ha: { maxRestart: 2%s }
`

// vmOn is where /cluster/resources has VM vmid: its node, status and
// hastate.
func vmOn(cl *model.Cluster, vmid int) (node, status, hastate string) {
	for _, r := range cl.Resources("vm") {
		if r.VMID == vmid {
			return r.Node, r.Status, r.HAState
		}
	}
	return "", "", ""
}

// TestVMAppHA (issue 34): a kind: vm app's ha: makes its VM the HA
// resource vm:<vmid> as a container's makes ct:<vmid>: refused with its
// disk on local storage; applied once the VM runs; state: stopped is
// HA's to carry out and the next plan starts nothing; after its node
// loses power HA starts it on the other node and the plan is clean (the
// pinned node is HA's to decide); dropping ha: removes the resource;
// destroy removes the resource first and then the VM.
func TestVMAppHA(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(2), pvetest.SharedStorage(model.SharedNFS))
	cl := c.srv.Cluster()
	grantHA(t, cl)
	c.offerVMImage()

	local := writeManifest(t, fmt.Sprintf(vmHAManifest, "local-lvm", ""))
	if r := c.run("plan", "-f", local); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "app web: ha: vm.disk is on storage local-lvm, which is local to its node") {
		t.Fatalf("plan of ha: with the disk on local-lvm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	m := writeManifest(t, fmt.Sprintf(vmHAManifest, "nfs", ""))
	ar := c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, status, _ := c.vmOf(m)
	sid := fmt.Sprintf("vm:%d", vmid)
	res := cl.HAResources("vm")
	if status != "running" || len(res) != 1 || res[0].SID != sid || res[0].State != "started" || res[0].MaxRestart == nil || *res[0].MaxRestart != 2 {
		t.Fatalf("after apply: VM %d %s, HA resources %+v\n%s", vmid, status, res, ar.stderr)
	}
	if !strings.Contains(ar.stderr, "web: ha") || !strings.Contains(ar.stderr, "add "+sid) {
		t.Errorf("apply does not say it adds %s:\n%s", sid, ar.stderr)
	}
	testenv.WaitFor(t, "HA to have "+sid+" started", func() bool { _, _, ha := vmOn(cl, vmid); return ha == "started" })
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	stopped := writeManifest(t, fmt.Sprintf(vmHAManifest, "nfs", ", state: stopped"))
	if r := c.run("plan", "-f", stopped); r.code != ExitChanges || !strings.Contains(r.stdout, "ha: state started → stopped") {
		t.Fatalf("plan of state: stopped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", stopped, "--auto-approve")
	testenv.WaitFor(t, "HA to stop "+sid, func() bool { _, st, ha := vmOn(cl, vmid); return st == "stopped" && ha == "stopped" })
	if r := c.run("plan", "-f", stopped); r.code != 0 {
		t.Fatalf("plan once HA stopped the VM (its running state is HA's): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	testenv.WaitFor(t, "HA to start "+sid+" again", func() bool { _, st, ha := vmOn(cl, vmid); return st == "running" && ha == "started" })

	if _, err := cl.SetNodePower("pve1", false, model.NodePower{PowerOff: true}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "HA to start the VM on pve2", func() bool { n, st, ha := vmOn(cl, vmid); return n == "pve2" && st == "running" && ha == "started" })
	if r := c.run("plan", "-f", m); r.code != 0 || strings.Contains(r.stdout, "replace") {
		t.Fatalf("plan after HA recovered the VM: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if s := c.mustRun("status", "-f", m); !strings.Contains(s.stdout, "pve2") || !strings.Contains(s.stdout, "running (HA: started)") {
		t.Errorf("status does not show the VM on pve2, started by HA:\n%s", s.stdout)
	}

	// Without ha: and without the pin HA no longer honours.
	noHA := writeManifest(t, strings.NewReplacer("    node: pve1\n", "", "    ha: { maxRestart: 2 }\n", "").Replace(fmt.Sprintf(vmHAManifest, "nfs", "")))
	if r := c.run("plan", "-f", noHA); r.code != ExitChanges || !strings.Contains(r.stdout, "ha: removed: the VM stops being an HA resource") {
		t.Fatalf("plan of dropping ha:: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", noHA, "--auto-approve")
	if res := cl.HAResources(""); len(res) != 0 {
		t.Fatalf("HA resources after ha: was dropped: %+v", res)
	}
	if r := c.run("plan", "-f", noHA); r.code != 0 {
		t.Fatalf("plan after ha: was dropped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	back := writeManifest(t, strings.Replace(fmt.Sprintf(vmHAManifest, "nfs", ""), "node: pve1", "node: pve2", 1))
	c.mustRun("apply", "-f", back, "--auto-approve")
	if res := cl.HAResources("vm"); len(res) != 1 {
		t.Fatalf("HA resources after ha: came back: %+v", res)
	}
	dr := c.mustRun("destroy", "-f", back, "--auto-approve")
	if res := cl.HAResources(""); len(res) != 0 || !strings.Contains(dr.stderr, "remove "+sid) {
		t.Errorf("after destroy: HA resources %+v\n%s", res, dr.stderr)
	}
	if n, _, _ := vmOn(cl, vmid); n != "" {
		t.Errorf("VM %d is still on %s after destroy", vmid, n)
	}
}
