package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// haManifest is an app with ha: whose rootfs and volume are on NFS,
// pinned to pve1; %s is the rootfs storage.
const haManifest = `project: ha
apps:
  - name: notes
    node: pve1
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs: { storage: %s, size: 1G }
    volumes:
      - name: data
        storage: nfs
        size: 1G
        mount: /srv/data
    ha: { maxRestart: 2 }
`

// grantHA gives corral's token Sys.Console on / (PVESysAdmin), which
// writing HA resources needs.
func grantHA(t *testing.T, cl *model.Cluster) {
	t.Helper()
	err := cl.UpdateACL(model.Auth{UserID: "root@pam"}, model.ACLUpdate{Path: "/", Roles: []string{"PVESysAdmin"},
		Users: []string{model.OperatorUser}, Tokens: []string{model.OperatorUser + "!" + model.OperatorToken}, Propagate: true})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHAAppComesBackAfterNodeFailure (issue 33): an app with ha: on
// shared storage is applied to pve1 of a two-node emulator with NFS;
// pve1 loses power, and PVE's HA (the emulator's CRM) fences it and
// starts the app's container on pve2 with no corral command run. The
// next plan is clean (exit 0): corral shows the app where HA put it and
// neither moves it back to its pinned node nor restarts it. The same app
// with its rootfs on local-lvm is refused with the reason.
func TestHAAppComesBackAfterNodeFailure(t *testing.T) {
	t.Parallel()
	// Instant, and at 1/100 of PVE's delays (fence after 0.6 s, the
	// agent lock after 1.2 s, a CRM round 0.1 s) with tasks as scaled.
	for _, scale := range []float64{0, 0.01} {
		t.Run(fmt.Sprint("scale ", scale), func(t *testing.T) {
			t.Parallel()
			haComesBack(t, scale)
		})
	}
}

func haComesBack(t *testing.T, scale float64) {
	c := newCluster(t, pvetest.Nodes(2), pvetest.SharedStorage(model.SharedNFS), pvetest.TimeScale(scale))
	cl := c.srv.Cluster()
	grantHA(t, cl)

	local := writeManifest(t, fmt.Sprintf(haManifest, "local-lvm"))
	r := c.run("plan", "-f", local)
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "app notes: ha: rootfs is on storage local-lvm, which is local to its node") || !strings.Contains(r.stderr+r.stdout, "put the rootfs and every volume on shared storage") {
		t.Fatalf("plan of ha: on local-lvm: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	m := writeManifest(t, fmt.Sprintf(haManifest, "nfs"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid := c.vmidOf(m, "notes")
	res := cl.HAResources("")
	if len(res) != 1 || res[0].SID != fmt.Sprintf("ct:%d", vmid) || res[0].State != "started" || res[0].MaxRestart == nil || *res[0].MaxRestart != 2 {
		t.Fatalf("HA resources after apply: %+v", res)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	if _, err := cl.SetNodePower("pve1", false, model.NodePower{PowerOff: true}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "HA to start the app on pve2", func() bool {
		for _, r := range cl.Resources("vm") {
			if r.VMID == vmid {
				return r.Node == "pve2" && r.Status == "running" && r.HAState == "started"
			}
		}
		return false
	})
	log := strings.Join(cl.HALog(), "\n")
	if want := fmt.Sprintf("recover service 'ct:%d' from fenced node 'pve1' to node 'pve2'", vmid); !strings.Contains(log, want) {
		t.Errorf("HA log lacks %q:\n%s", want, log)
	}

	r = c.run("plan", "-f", m)
	if r.code != 0 || strings.Contains(r.stdout, "move") || strings.Contains(r.stdout, "replace") {
		t.Fatalf("plan after HA recovered the app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	st := c.status(m)
	if len(st.Apps) != 1 || st.Apps[0].App != "notes" || len(st.Apps[0].Containers) != 1 || st.Apps[0].Containers[0].VMID != vmid || st.Apps[0].Containers[0].Status != "running" {
		t.Fatalf("status after HA recovered the app: %+v", st)
	}
	if s := c.mustRun("status", "-f", m); !strings.Contains(s.stdout, "pve2") || !strings.Contains(s.stdout, "running (HA: started)") {
		t.Errorf("status does not show the app on pve2, started by HA:\n%s", s.stdout)
	}
}

// TestHAStateThroughApply (issue 33): with ha: the running state is
// HA's: state: stopped is applied as the resource's state and HA stops
// the container; dropping ha: removes the resource and the plan starts
// the container again; destroy removes an HA app and its resource.
func TestHAStateThroughApply(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(2), pvetest.SharedStorage(model.SharedNFS))
	cl := c.srv.Cluster()
	grantHA(t, cl)
	m := writeManifest(t, fmt.Sprintf(haManifest, "nfs"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid := c.vmidOf(m, "notes")
	running := func() bool { return cl.GuestPID(vmid) != 0 }
	// corral move and drain leave an HA app's node to HA.
	for _, args := range [][]string{{"move", "notes", "--to", "pve2"}, {"drain", "pve1"}} {
		r := c.run(append(args, "-f", m, "--auto-approve")...)
		if want := fmt.Sprintf("app notes: CT %d is an HA resource, and PVE's HA decides its node: move it with ha-manager migrate ct:%d NODE", vmid, vmid); r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Fatalf("corral %s of an HA app: exit %d\n%s%s", args[0], r.code, r.stdout, r.stderr)
		}
	}
	// corral rescue would take its volumes while HA may start it.
	if r := c.run("rescue", "notes", "--stop", "-f", m, "--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().OperatorToken, "--fingerprint", c.srv.Fingerprint(), "--", "true"); r.code == 0 || !strings.Contains(r.stderr, "is an HA resource: PVE's HA could start or relocate it") || !running() {
		t.Fatalf("corral rescue of an HA app: exit %d, running %v\n%s%s", r.code, running(), r.stdout, r.stderr)
	}

	// A new volume needs the container stopped: apply's stop and start
	// go through HA (hastop, hastart) and wait for the container.
	more := strings.Replace(fmt.Sprintf(haManifest, "nfs"), "        mount: /srv/data\n", "        mount: /srv/data\n      - { name: logs, storage: nfs, size: 1G, mount: /srv/logs }\n", 1)
	writeTo(t, m, more)
	ar := c.mustRun("apply", "-f", m, "--auto-approve")
	if !running() || !strings.Contains(ar.stderr, "notes: stop ct") || !strings.Contains(ar.stderr, "notes: start ct") {
		t.Fatalf("apply of a new volume to an HA app: running %v\n%s", running(), ar.stderr)
	}
	if res := cl.HAResources(""); len(res) != 1 || res[0].State != "started" {
		t.Fatalf("HA resources after a restart through HA: %+v", res)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after a restart through HA: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	writeTo(t, m, fmt.Sprintf(haManifest, "nfs"))
	c.mustRun("apply", "-f", m, "--auto-approve") // the logs volume is detached again

	stopped := strings.Replace(fmt.Sprintf(haManifest, "nfs"), "ha: { maxRestart: 2 }", "ha: { maxRestart: 2, state: stopped }", 1)
	writeTo(t, m, stopped)
	if r := c.run("plan", "-f", m); r.code != ExitChanges || !strings.Contains(r.stdout, "ha: state started → stopped") {
		t.Fatalf("plan of state: stopped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if res := cl.HAResources(""); len(res) != 1 || res[0].State != "stopped" {
		t.Fatalf("HA resources after state: stopped: %+v", res)
	}
	testenv.WaitFor(t, "HA to stop the container", func() bool { return !running() })
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan once HA stopped it: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	writeTo(t, m, strings.Replace(stopped, "    ha: { maxRestart: 2, state: stopped }\n", "", 1))
	c.mustRun("apply", "-f", m, "--auto-approve")
	if res := cl.HAResources(""); len(res) != 0 {
		t.Fatalf("HA resources after ha: was dropped: %+v", res)
	}
	if !running() {
		t.Errorf("the container is not started once it is no longer HA's")
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after ha: was dropped: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	writeTo(t, m, fmt.Sprintf(haManifest, "nfs"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.mustRun("destroy", "-f", m, "--auto-approve")
	if res := cl.HAResources(""); len(res) != 0 {
		t.Errorf("HA resources after destroy: %+v", res)
	}
}

func writeTo(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// haPair is two apps with ha: on NFS; %s are their ha: lines.
const haPair = `project: ha
apps:
  - name: a
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs: { storage: nfs, size: 1G }
    ha: %s
  - name: b
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs: { storage: nfs, size: 1G }
    ha: %s
`

// TestHAGroupsAndRules (issue 33): on PVE 8.4 ha.group sets the
// resource's group; on PVE 9.1 ha.rule adds the container to an existing
// node-affinity rule and takes it out again when ha.rule goes, and a
// group is refused with the reason.
func TestHAGroupsAndRules(t *testing.T) {
	t.Parallel()
	t.Run("8.4 group", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, pvetest.Nodes(2), pvetest.SharedStorage(model.SharedNFS), pvetest.Version("8.4"))
		cl := c.srv.Cluster()
		grantHA(t, cl)
		if err := cl.SetHAGroup(true, map[string]string{"group": "both", "nodes": "pve1,pve2"}, nil); err != nil {
			t.Fatal(err)
		}
		m := writeManifest(t, fmt.Sprintf(haPair, "{ group: both }", "{}"))
		c.mustRun("apply", "-f", m, "--auto-approve")
		groups := map[string]string{}
		for _, r := range cl.HAResources("") {
			groups[r.SID] = r.Group
		}
		if groups[fmt.Sprintf("ct:%d", c.vmidOf(m, "a"))] != "both" || len(groups) != 2 {
			t.Fatalf("HA resources' groups: %v", groups)
		}
		if r := c.run("plan", "-f", m); r.code != 0 {
			t.Fatalf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		writeTo(t, m, fmt.Sprintf(haPair, "{ rule: fast }", "{}"))
		if r := c.run("plan", "-f", m); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "app a: ha.rule: this cluster's PVE has no HA rules (PVE 8): name an HA group with ha.group instead") {
			t.Fatalf("plan with a rule on 8.4: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("9.1 rule", func(t *testing.T) {
		t.Parallel()
		c := newCluster(t, pvetest.Nodes(2), pvetest.SharedStorage(model.SharedNFS))
		cl := c.srv.Cluster()
		grantHA(t, cl)
		m := writeManifest(t, fmt.Sprintf(haPair, "{}", "{}"))
		c.mustRun("apply", "-f", m, "--auto-approve")
		sa, sb := fmt.Sprintf("ct:%d", c.vmidOf(m, "a")), fmt.Sprintf("ct:%d", c.vmidOf(m, "b"))
		if err := cl.SetHARule(true, map[string]string{"rule": "both", "type": "node-affinity", "resources": sa, "nodes": "pve1,pve2"}, nil, ""); err != nil {
			t.Fatal(err)
		}
		writeTo(t, m, fmt.Sprintf(haPair, "{ rule: both }", "{ rule: both }"))
		r := c.run("plan", "-f", m)
		if r.code != ExitChanges || !strings.Contains(r.stdout, "ha: joins rule both") || strings.Count(r.stdout, "joins rule") != 1 {
			t.Fatalf("plan joining rule both: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		c.mustRun("apply", "-f", m, "--auto-approve")
		if rule, err := cl.HARule("both"); err != nil || rule.Resources != sa+","+sb {
			t.Fatalf("rule both after apply: %+v %v", rule, err)
		}
		if r := c.run("plan", "-f", m); r.code != 0 {
			t.Fatalf("plan after joining: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		writeTo(t, m, fmt.Sprintf(haPair, "{ rule: both }", "{}"))
		c.mustRun("apply", "-f", m, "--auto-approve")
		if rule, err := cl.HARule("both"); err != nil || rule.Resources != sa {
			t.Fatalf("rule both after b left it: %+v %v", rule, err)
		}
		writeTo(t, m, fmt.Sprintf(haPair, "{ group: both }", "{}"))
		if r := c.run("plan", "-f", m); r.code == 0 || !strings.Contains(r.stdout+r.stderr, "app a: ha.group: this cluster runs PVE 9, whose HA groups were migrated to rules") {
			t.Fatalf("plan with a group on 9.1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}
