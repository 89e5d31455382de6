package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

const moveManifest = `apps:
  - name: web
    NODE
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 1G
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
      - name: logs
        size: 512M
        mount: /var/log/web
  - name: api
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    node: pve3
    rootfs:
      size: 1G
`

func moveManifestOn(node string) string {
	line := "# no node"
	if node != "" {
		line = "node: " + node
	}
	return strings.Replace(moveManifest, "NODE", line, 1)
}

func newMoveCluster(t *testing.T) *cluster {
	t.Helper()
	srv := pvetest.Start(t, pvetest.Nodes(3)).Server
	return &cluster{t: t, srv: srv}
}

// where says on which node each corral container (app, keeper, carrier)
// is, by the emulator's own files.
func (c *cluster) where() (apps map[string]string, carriers int) {
	apps = map[string]string{}
	for _, r := range c.srv.Cluster().Resources("vm") {
		switch {
		case strings.Contains(r.Tags, "corral-carrier"):
			carriers++
		case strings.Contains(r.Tags, "corral-app-"):
			for _, t := range strings.Split(r.Tags, ";") {
				if a, ok := strings.CutPrefix(t, "corral-app-"); ok {
					apps[a] = r.Node
				}
			}
		}
	}
	return apps, carriers
}

// volumeDir is the directory of volid on node.
func (c *cluster) volumeDir(node, volid string) string {
	c.t.Helper()
	dir, err := c.srv.Cluster().VolumePath(node, volid)
	if err != nil {
		c.t.Fatalf("volume %s on %s: %v", volid, node, err)
	}
	return dir
}

// markVolumes writes a marker file into each of web's volumes on node and
// returns the volids by name.
func (c *cluster) markWeb(m, node string) map[string]string {
	c.t.Helper()
	out := map[string]string{}
	for _, v := range c.status(m).Apps[0].Volumes {
		out[v.Name] = v.VolID
		if err := os.WriteFile(filepath.Join(c.volumeDir(node, v.VolID), "marker"), []byte("web/"+v.Name), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	return out
}

// checkMoved checks that web runs on node with both volumes recorded
// there, their markers intact, and that nothing of the move is left: no
// carrier, no volume of the old volids on the old node, no image on any
// node that no guest config or keeper references.
func (c *cluster) checkMoved(m, node, oldNode string, old map[string]string) {
	c.t.Helper()
	apps, carriers := c.where()
	if apps["web"] != node || carriers != 0 {
		c.t.Fatalf("web on %q, %d carriers left; want web on %s and none", apps["web"], carriers, node)
	}
	st := c.status(m)
	if st.Apps[0].Containers[0].Status != "running" || len(st.Apps[0].Volumes) != 2 {
		c.t.Fatalf("web after the move: %+v", st.Apps[0])
	}
	for _, v := range st.Apps[0].Volumes {
		data, err := os.ReadFile(filepath.Join(c.volumeDir(node, v.VolID), "marker"))
		if err != nil || string(data) != "web/"+v.Name {
			c.t.Fatalf("volume %s (%s on %s) lost its data: %q %v", v.Name, v.VolID, node, data, err)
		}
		if mp := c.mountOf(st.Apps[0].Containers[0].VMID, v.VolID); mp == "" {
			c.t.Fatalf("volume %s (%s) is not attached to web", v.Name, v.VolID)
		}
	}
	for name, volid := range old {
		if _, err := c.srv.Cluster().VolumePath(oldNode, volid); err == nil {
			c.t.Errorf("volume %s: the old copy %s is still on %s", name, volid, oldNode)
		}
	}
	c.noStrays()
}

// mountOf is the mpN of CT vmid that mounts volid, or "".
func (c *cluster) mountOf(vmid int, volid string) string {
	for k, v := range c.config(vmid) {
		if strings.HasPrefix(k, "mp") && strings.HasPrefix(v, volid+",") {
			return k
		}
	}
	return ""
}

// noStrays fails when an image volume on a node's local-lvm is referenced
// by no config on that node (a stale migration copy, a lost volume), or a
// volume is mounted by two app containers.
func (c *cluster) noStrays() {
	c.t.Helper()
	cl := c.srv.Cluster()
	refs := map[string]int{} // node/volid → app mounts
	known := map[string]bool{}
	for _, r := range cl.Resources("vm") {
		for k, v := range c.config(r.VMID) {
			if k == "rootfs" || strings.HasPrefix(k, "mp") || strings.HasPrefix(k, "unused") {
				volid := strings.SplitN(v, ",", 2)[0]
				known[r.Node+"/"+volid] = true
				if strings.HasPrefix(k, "mp") && strings.Contains(r.Tags, "corral-app-") {
					refs[volid]++
				}
			}
		}
	}
	for volid, n := range refs {
		if n > 1 {
			c.t.Errorf("volume %s is mounted by %d app containers", volid, n)
		}
	}
	for _, node := range []string{"pve1", "pve2", "pve3"} {
		entries, err := cl.Content(node, "local-lvm", "", 0)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, e := range entries {
			if !known[node+"/"+e.VolID()] {
				c.t.Errorf("stray volume %s on %s (no config references it)", e.VolID(), node)
			}
		}
	}
}

// TestMoveAppWithVolumes: an app with two retained volumes moves between
// nodes when its node: changes, by corral move, and by corral drain; each
// time the data goes with it (marker files), nothing is left on the old
// node, and the plan says what and why. Snapshots are refused unless
// --delete-snapshots (issue 18).
func TestMoveAppWithVolumes(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	m1 := writeManifest(t, moveManifestOn("pve1"))
	c.mustRun("apply", "-f", m1, "--auto-approve")
	old := c.markWeb(m1, "pve1")

	// node: pve1 → pve2 in the manifest.
	m2 := writeManifest(t, moveManifestOn("pve2"))
	r := c.run("plan", "-f", m2)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "> app web (move ct ") || !strings.Contains(r.stdout, "from pve1 to pve2)") ||
		!strings.Contains(r.stdout, "node changes pve1 → pve2") || !strings.Contains(r.stdout, "volume data: move") {
		t.Fatalf("plan of the node change: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("plan", "-f", m2, "-o", "json")
	var pj struct {
		Changes []struct {
			App, Action, Node, From string
			Reasons                 []string
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil {
		t.Fatal(err)
	}
	if len(pj.Changes) != 2 || pj.Changes[0].Action != "move" || pj.Changes[0].From != "pve1" || pj.Changes[0].Node != "pve2" || pj.Changes[1].Action != "no-op" {
		t.Fatalf("plan -o json: %+v", pj.Changes)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	c.checkMoved(m2, "pve2", "pve1", old)
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after the move: exit %d\n%s", r.code, r.stdout)
	}

	// corral move: refused while the manifest pins the app, then done
	// with a manifest that does not; the next apply leaves it there.
	if r := c.run("move", "web", "--to", "pve3", "-f", m2, "--auto-approve"); r.code == 0 || !strings.Contains(r.stderr, "pins it to node pve2") {
		t.Fatalf("move of a pinned app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	free := writeManifest(t, moveManifestOn(""))
	old = c.markWeb(free, "pve2")
	c.mustRun("move", "web", "--to", "pve3", "-f", free, "--auto-approve")
	c.checkMoved(free, "pve3", "pve2", old)
	if r := c.run("plan", "-f", free); r.code != 0 {
		t.Fatalf("plan after corral move: exit %d\n%s", r.code, r.stdout)
	}

	// Snapshots: refused with the reason and the fix, then deleted with
	// consent.
	c.mustC("snapshot", "web", "before", "-f", free)
	r = c.run("move", "web", "--to", "pve1", "-f", free, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stdout, "has snapshots (the latest is before)") || !strings.Contains(r.stdout, "--delete-snapshots") {
		t.Fatalf("move with a snapshot: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	old = c.markWeb(free, "pve3")
	c.mustRun("move", "web", "--to", "pve1", "-f", free, "--auto-approve", "--delete-snapshots")
	c.checkMoved(free, "pve1", "pve3", old)

	// Drain pve3: api (no volumes) leaves it; it is pinned there, so
	// drain refuses until the manifest lets it go.
	if r := c.run("drain", "pve3", "-f", free, "--auto-approve"); r.code == 0 || !strings.Contains(r.stderr, "pins api to node pve3") {
		t.Fatalf("drain with a pinned app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	unpinned := writeManifest(t, strings.Replace(moveManifestOn(""), "    node: pve3\n", "", 1))
	old = c.markWeb(unpinned, "pve1")
	r = c.run("drain", "pve1", "-f", unpinned, "--auto-approve", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"summary"`) {
		t.Fatalf("drain pve1: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	apps, _ := c.where()
	if apps["web"] == "pve1" || apps["web"] == "" {
		t.Fatalf("web still on %q after drain pve1", apps["web"])
	}
	c.checkMoved(unpinned, apps["web"], "pve1", old)
	c.mustRun("drain", "pve3", "-f", unpinned, "--auto-approve")
	apps, _ = c.where()
	for app, node := range apps {
		if node == "pve3" {
			t.Errorf("app %s still on pve3 after drain", app)
		}
	}
	if r := c.run("plan", "-f", unpinned); r.code != 0 {
		t.Fatalf("plan after the drains: exit %d\n%s", r.code, r.stdout)
	}
}

// TestMoveOnSharedStorage: an app whose volume is on a shared storage
// (NFS) moves without copying it: the same file is handed from the
// keeper on the old node to the keeper on the new one, its data in
// place, and it is mounted by the app on the new node only.
func TestMoveOnSharedStorage(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.Nodes(3), pvetest.SharedStorage(model.SharedNFS)).Server
	c := &cluster{t: t, srv: srv}
	m1 := writeManifest(t, sharedManifest)
	c.mustRun("apply", "-f", m1, "--auto-approve")
	vol := c.status(m1).Apps[0].Volumes[0].VolID
	if err := os.WriteFile(filepath.Join(c.volumeDir("pve1", vol), "marker"), []byte("notes/data"), 0o644); err != nil {
		t.Fatal(err)
	}
	m2 := writeManifest(t, strings.Replace(sharedManifest, "node: pve1", "node: pve2", 1))
	c.mustRun("apply", "-f", m2, "--auto-approve")
	st := c.status(m2).Apps[0]
	apps, carriers := c.where()
	if apps["notes"] != "pve2" || carriers != 0 || len(st.Volumes) != 1 || !strings.HasPrefix(st.Volumes[0].VolID, "nfs:") {
		t.Fatalf("after the move: notes on %q, %d carriers, volumes %+v", apps["notes"], carriers, st.Volumes)
	}
	data, err := os.ReadFile(filepath.Join(c.volumeDir("pve2", st.Volumes[0].VolID), "marker"))
	if err != nil || string(data) != "notes/data" {
		t.Fatalf("the shared volume lost its data: %q %v", data, err)
	}
	c.noStrays()
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after the move: exit %d\n%s", r.code, r.stdout)
	}
}

// TestDrainMovesAppsInParallel: six apps with two retained volumes each,
// all on pve1, are drained at once (parallelism 6) and spread over pve2
// and pve3, each with its data; nothing is left on pve1 but its keeper,
// no carrier, no stray volume, nothing mounted twice.
func TestDrainMovesAppsInParallel(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	var b strings.Builder
	for i := range 6 {
		fmt.Fprintf(&b, "  - name: app%d\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    memory: 256\n    rootfs: {size: 1G}\n    volumes:\n      - {name: data, size: 1G, mount: /srv/data}\n      - {name: logs, size: 512M, mount: /var/log/app}\n", i)
	}
	on1 := writeManifest(t, "placement: {nodes: [pve1]}\napps:\n"+b.String())
	free := writeManifest(t, "apps:\n"+b.String())
	c.mustRun("apply", "-f", on1, "--auto-approve")
	for _, a := range c.status(on1).Apps {
		for _, v := range a.Volumes {
			if err := os.WriteFile(filepath.Join(c.volumeDir("pve1", v.VolID), "marker"), []byte(a.App+"/"+v.Name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := c.mustRun("drain", "pve1", "-f", free, "--auto-approve", "--parallelism", "6")
	if !strings.Contains(r.stdout, "Plan: 6 to move") || !strings.Contains(r.stdout, "by policy spread") {
		t.Errorf("drain plan:\n%s", r.stdout)
	}
	apps, carriers := c.where()
	per := map[string]int{}
	for _, n := range apps {
		per[n]++
	}
	if per["pve1"] != 0 || per["pve2"] != 3 || per["pve3"] != 3 || carriers != 0 {
		t.Fatalf("apps per node after the drain %v, %d carriers", per, carriers)
	}
	for _, a := range c.status(free).Apps {
		for _, v := range a.Volumes {
			data, err := os.ReadFile(filepath.Join(c.volumeDir(apps[a.App], v.VolID), "marker"))
			if err != nil || string(data) != a.App+"/"+v.Name {
				t.Errorf("%s/%s (%s on %s) lost its data: %q %v", a.App, v.Name, v.VolID, apps[a.App], data, err)
			}
		}
	}
	c.noStrays()
	if r := c.run("plan", "-f", free); r.code != 0 {
		t.Fatalf("plan after the drain: exit %d\n%s", r.code, r.stdout)
	}
}
