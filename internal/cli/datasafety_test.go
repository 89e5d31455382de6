package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// End-to-end tests of what users do around corral (issue 11): two corrals
// at once, a failed apply, edits in the PVE web UI. Each runs the real
// CLI against the emulator over HTTPS.

// threeVolumes is an app with three retained volumes.
func threeVolumes(app string) string {
	return fmt.Sprintf(`apps:
  - name: %s
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 2G
    volumes:
      - name: a
        size: 1G
        mount: /srv/a
      - name: b
        size: 1G
        mount: /srv/b
      - name: c
        size: 1G
        mount: /srv/c
`, app)
}

// appliedAlpha is where most scenarios here begin: an emulated cluster
// (with opts) with app alpha (threeVolumes) applied; it returns the cluster and the
// manifest's path.
func appliedAlpha(t *testing.T, opts ...pvetest.Option) (*cluster, string) {
	t.Helper()
	c := newCluster(t, opts...)
	m := writeManifest(t, threeVolumes("alpha"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	return c, m
}

// operatorAuth is the emulator's operator token (the one corral runs
// with) as the model's callers authenticate: a scenario acts as a
// corral killed half-way would have.
func (c *cluster) operatorAuth() model.Auth {
	tokenID, _, _ := strings.Cut(c.srv.Credentials().OperatorToken, "=")
	user, _, _ := strings.Cut(tokenID, "!")
	return model.Auth{UserID: user, TokenID: tokenID}
}

// keeperOf returns the VMIDs of the keepers on pve, oldest first.
func (c *cluster) keepers() []int {
	c.t.Helper()
	var out []int
	for _, r := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(r.Tags, plan.TagKeeper) {
			out = append(out, r.VMID)
		}
	}
	return out
}

// appCTs returns the VMIDs of every CT whose config mounts volid.
func (c *cluster) mountedBy(volid string) []int {
	c.t.Helper()
	var out []int
	for _, r := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(r.Tags, plan.TagKeeper) {
			continue
		}
		for k, v := range c.config(r.VMID) {
			if strings.HasPrefix(k, "mp") && plan.ParseMountPoint(v).Volume == volid {
				out = append(out, r.VMID)
			}
		}
	}
	return out
}

func (c *cluster) volumes() []plan.VolumeInfo {
	c.t.Helper()
	r := c.mustRun("volumes", "-o", "json")
	var v struct {
		Volumes []plan.VolumeInfo `json:"volumes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		c.t.Fatalf("volumes -o json: %v\n%s", err, r.stdout)
	}
	return v.Volumes
}

// Scenario 1 and 10: two applies at once, of two manifests sharing the
// node's keeper, and of the same manifest twice. Every volume stays
// recorded, every app has one container, each volume is mounted once, and
// the next plan of each manifest has nothing to do.
func TestConcurrentApplies(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m1, m2 := writeManifestIn(t, "alpha", threeVolumes("alpha")), writeManifestIn(t, "beta", threeVolumes("beta")) // two projects
	var wg sync.WaitGroup
	results := make([]result, 4)
	for i, m := range []string{m1, m2, m1, m2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.run("apply", "-f", m, "--auto-approve", "--skip-preflight")
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Fatalf("apply %d: exit %d\n%s\n%s", i, r.code, r.stdout, r.stderr)
		}
	}
	if ks := c.keepers(); len(ks) != 1 {
		t.Errorf("keepers %v, want one (the one that lost the race to be first is removed)", ks)
	}
	vols := c.volumes()
	if len(vols) != 6 {
		t.Fatalf("volumes: %+v, want 6", vols)
	}
	for _, v := range vols {
		if got := c.mountedBy(v.VolID); len(got) != 1 || v.Holder == "keeper" {
			t.Errorf("volume %s/%s (%s) mounted by %v (holder %s), want exactly one app container", v.App, v.Name, v.VolID, got, v.Holder)
		}
	}
	for _, m := range []string{m1, m2} {
		if r := c.run("plan", "-f", m); r.code != 0 {
			t.Errorf("plan after the concurrent applies: exit %d\n%s", r.code, r.stdout)
		}
	}
	// No lease is left behind.
	c.noLeaseIn(c.keepers()[0])
}

// Scenario 2: an apply that fails after clearing the keeper's protection
// (to make a new volume) leaves it protected.
func TestFailedApplyLeavesKeeperProtected(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t)
	vmid := c.status(m).Apps[0].Containers[0].VMID
	more := writeManifest(t, threeVolumes("alpha")+"      - name: d\n        size: 1G\n        mount: /srv/d\n")
	// The app's container is busy (a backup holds its lock): the new
	// volume is made in the keeper, then stopping the app fails.
	if err := c.srv.Cluster().HoldLock(vmid, "backup", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	r := c.run("apply", "-f", more, "--auto-approve", "--lock-wait", "500ms")
	if r.code != ExitError || !strings.Contains(r.stderr, "volume done") {
		t.Fatalf("apply against a locked container: exit %d (want 1 after making the volume)\n%s", r.code, r.stderr)
	}
	for _, k := range c.keepers() {
		if got := c.config(k)["protection"]; got != "1" {
			t.Errorf("keeper %d protection=%q after the failed apply, want 1\n%s", k, got, r.stderr)
		}
	}
}

// Scenario 3: the app's tags edited in the web UI. corral still knows its
// container, puts the tags back, and never creates a second one.
func TestTagsEditedInWebUI(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t)
	vmid := c.status(m).Apps[0].Containers[0].VMID
	root := model.Auth{UserID: "root@pam"}
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", vmid, map[string]string{"tags": "mytag"}); err != nil {
		t.Fatal(err)
	}
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "lacks corral's tags") || strings.Contains(r.stdout, "create") && strings.Contains(r.stdout, "no container for this app") {
		t.Fatalf("plan after the tags were edited: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if n := len(c.srv.Cluster().Resources("vm")); n != 2 {
		t.Errorf("%d guests after apply, want 2 (app and keeper)", n)
	}
	if tags := c.config(vmid)["tags"]; !strings.Contains(tags, "corral-app-alpha") {
		t.Errorf("tags=%q, want corral's tags back", tags)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan: exit %d\n%s", r.code, r.stdout)
	}
}

// Scenario 4: a corral-volume line deleted from the keeper's Notes, and
// a record's mount point removed in the web UI: nothing is forgotten, no
// empty volume is created, and the next apply writes both back.
func TestKeeperNotesAndMountPointEdited(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t)
	before := c.volumes()
	k := c.keepers()[0]
	root := model.Auth{UserID: "root@pam"}
	conf, _, err := c.srv.Cluster().CTConfig(root, "pve", k, true, "")
	if err != nil {
		t.Fatal(err)
	}
	desc := conf["description"]
	var kept []string
	for _, line := range strings.Split(desc, "\n") {
		if !strings.Contains(line, "alpha/a=") {
			kept = append(kept, line)
		}
	}
	var mpB string
	for key, v := range conf {
		if strings.HasPrefix(key, "mp") && strings.Contains(v, "/corral/alpha/b") {
			mpB = key
		}
	}
	params := map[string]string{"description": strings.Join(kept, "\n"), "protection": "0"}
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, params); err != nil {
		t.Fatal(err)
	}
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, map[string]string{"delete": mpB}); err != nil {
		t.Fatal(err)
	}
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || strings.Contains(r.stdout, ": create (") {
		t.Fatalf("plan after the edits: exit %d (want 2, a keeper repair and no new volume)\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	after := c.volumes()
	if len(after) != len(before) {
		t.Fatalf("volumes before %+v\nafter %+v", before, after)
	}
	for i := range before {
		if before[i].VolID != after[i].VolID {
			t.Errorf("volume %s/%s: %s before, %s after", before[i].App, before[i].Name, before[i].VolID, after[i].VolID)
		}
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after the repair: exit %d\n%s", r.code, r.stdout)
	}
}

// The lock: a live lease of another corral stops apply with a message
// naming the holder; unlock refuses to break a lease that may be live
// without --force; after it, apply runs.
// holdLease writes a live lease (an hour) of holder running command into
// the Notes of node pve's first keeper, as another corral would.
func (c *cluster) holdLease(holder, command string) {
	c.t.Helper()
	k := c.keepers()[0]
	root := model.Auth{UserID: "root@pam"}
	conf, _, err := c.srv.Cluster().CTConfig(root, "pve", k, true, "")
	if err != nil {
		c.t.Fatal(err)
	}
	lease := plan.Lease{ID: "feedface", Holder: holder, Command: command, Since: time.Now(), Until: time.Now().Add(time.Hour)}
	notes := plan.ParseKeeperNotes(conf["description"])
	notes.Lease = &lease
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, map[string]string{"description": notes.Render()}); err != nil {
		c.t.Fatal(err)
	}
}

func TestLockHeldAndUnlock(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t)
	c.holdLease("ops@elsewhere:4242", "apply")
	grow := writeManifest(t, strings.Replace(threeVolumes("alpha"), "memory: 256", "memory: 512", 1))
	r := c.run("apply", "-f", grow, "--auto-approve", "--lock-timeout", "0")
	if r.code != ExitError || !strings.Contains(r.stderr, "ops@elsewhere:4242") || !strings.Contains(r.stderr, "corral unlock") {
		t.Fatalf("apply while locked: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("apply", "-f", m, "--lock-timeout", "-1s", "--auto-approve"); r.code != ExitError || !strings.Contains(r.stderr, "--lock-timeout") {
		t.Errorf("negative --lock-timeout: exit %d\n%s", r.code, r.stderr)
	}
	r = c.run(append([]string{"unlock"}, c.connArgs()...)...)
	if r.code != ExitError || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("unlock of a live lease: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run(append([]string{"unlock", "--force"}, c.connArgs()...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "ops@elsewhere:4242") {
		t.Fatalf("unlock --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", grow, "--auto-approve", "--lock-timeout", "0")
	if got := c.config(c.status(grow).Apps[0].Containers[0].VMID)["memory"]; got != "512" {
		t.Errorf("memory=%s after apply, want 512", got)
	}
}

// Scenario 8: adopting a volume corral already keeps for another app is
// refused before anything changes.
func TestAdoptOfAnotherAppsVolumeRefused(t *testing.T) {
	t.Parallel()
	c, _ := appliedAlpha(t)
	var volid string
	for _, v := range c.volumes() {
		if v.Name == "a" {
			volid = v.VolID
		}
	}
	thief := writeManifest(t, `apps:
  - name: beta
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    volumes:
      - name: stolen
        mount: /srv/stolen
        adopt: `+volid+"\n")
	before := len(c.srv.Cluster().Resources("vm"))
	for _, verb := range []string{"plan", "apply"} {
		r := c.run(verb, "-f", thief, "--auto-approve")
		if verb == "plan" {
			r = c.run(verb, "-f", thief)
		}
		if r.code != ExitError || !strings.Contains(r.stdout+r.stderr, "one volume cannot belong to two apps") {
			t.Fatalf("%s adopting alpha's volume: exit %d\n%s\n%s", verb, r.code, r.stdout, r.stderr)
		}
	}
	if after := len(c.srv.Cluster().Resources("vm")); after != before {
		t.Errorf("%d guests before, %d after a refused apply", before, after)
	}
	if got := c.mountedBy(volid); len(got) != 1 {
		t.Errorf("%s mounted by %v, want alpha's container only", volid, got)
	}
}

// Scenario 11: a pending delete=mpN on the running app (left by a destroy
// racing an apply, or made by hand) is part of the observed state: plan
// shows it, apply drops it, and the volume stays mounted.
func TestPendingDeleteIsObserved(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t)
	vmid := c.status(m).Apps[0].Containers[0].VMID
	var mpKey string
	for k, v := range c.config(vmid) {
		if strings.HasPrefix(k, "mp") && strings.Contains(v, "mp=/srv/a") {
			mpKey = k
		}
	}
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", vmid, map[string]string{"delete": mpKey}); err != nil {
		t.Fatal(err)
	}
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "drop pending changes "+mpKey+" (delete)") {
		t.Fatalf("plan with a pending delete of %s: exit %d\n%s", mpKey, r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", r.code, r.stdout)
	}
	text, err := c.srv.Cluster().ConfigText(vmid)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, "[pve:pending]") || !strings.Contains(text, "mp=/srv/a") {
		t.Errorf("config after apply still has pending changes or lost /srv/a:\n%s", text)
	}
}

// Scenario 13: dropping a volume from the manifest takes one apply: the
// detached volume leaves no unusedN behind for a second one.
func TestDetachTakesOneApply(t *testing.T) {
	t.Parallel()
	c, _ := appliedAlpha(t)
	fewer := writeManifest(t, strings.Replace(threeVolumes("alpha"), "      - name: c\n        size: 1G\n        mount: /srv/c\n", "", 1))
	c.mustRun("apply", "-f", fewer, "--auto-approve")
	if r := c.run("plan", "-f", fewer); r.code != 0 {
		t.Fatalf("plan after one apply: exit %d\n%s", r.code, r.stdout)
	}
	vols := c.volumes()
	if len(vols) != 3 {
		t.Fatalf("volumes %+v, want all three kept", vols)
	}
}

// Scenario 13: a corral killed during destroy leaves its shutdown task
// running; the next plan waits for it instead of reporting the container
// as running (it stops a moment later).
func TestPlanWaitsForRunningShutdown(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t, pvetest.TimeScale(0.25)) // vzshutdown: 1 s
	srv := c.srv
	vmid := c.status(m).Apps[0].Containers[0].VMID
	if _, err := srv.Cluster().ShutdownCT(c.operatorAuth(), "pve", vmid, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	r := c.run("plan", "-f", m)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "container is stopped") {
		t.Fatalf("plan during a shutdown: exit %d (want 2: the container will be stopped)\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// A keeper left unprotected (a killed corral, or by hand) is shown by
// status and plan, and repaired by apply.
func TestUnprotectedKeeperShownAndRepaired(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t)
	k := c.keepers()[0]
	if err := c.srv.Cluster().UpdateCTConfig(model.Auth{UserID: "root@pam"}, "pve", k, map[string]string{"protection": "0"}); err != nil {
		t.Fatal(err)
	}
	r := c.mustRun("status", "-f", m)
	if !strings.Contains(r.stdout, fmt.Sprintf("keeper %d on pve: protection is off (corral apply repairs it)", k)) {
		t.Errorf("status does not show the unprotected keeper:\n%s", r.stdout)
	}
	var st struct {
		Keepers []struct {
			VMID      int  `json:"vmid"`
			Protected bool `json:"protected"`
		} `json:"keepers"`
	}
	json.Unmarshal([]byte(c.mustRun("status", "-f", m, "-o", "json").stdout), &st)
	if len(st.Keepers) != 1 || st.Keepers[0].Protected {
		t.Errorf("status -o json keepers: %+v", st.Keepers)
	}
	if r := c.run("plan", "-f", m); r.code != ExitChanges || !strings.Contains(r.stdout, "protection is off") {
		t.Errorf("plan: exit %d\n%s", r.code, r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if got := c.config(k)["protection"]; got != "1" {
		t.Errorf("protection=%q after apply", got)
	}
}

// Scenario 7: tags in any case are compared as PVE stores them
// (lower-cased, de-duplicated, sorted), so a manifest tag Prod is no
// change on every plan.
func TestTagsComparedAsPVEStoresThem(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, strings.Replace(threeVolumes("alpha"), "    memory: 256\n", "    memory: 256\n    tags: [Zeta, Prod, prod]\n", 1))
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid := c.status(m).Apps[0].Containers[0].VMID
	if got := c.config(vmid)["tags"]; got != "corral;corral-app-alpha;corral-project-demo;prod;zeta" {
		t.Errorf("tags=%q", got)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after apply: exit %d\n%s", r.code, r.stdout)
	}
}

// manyApps is n apps with one volume each; app bad (if set) names a
// template that cannot be downloaded.
func manyApps(n int, bad string) string {
	var b strings.Builder
	b.WriteString("apps:\n")
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("app%02d", i)
		tmpl := "debian-12-standard_12.12-1_amd64.tar.zst"
		if name == bad {
			tmpl = "no-such-template_1.0-1_amd64.tar.zst" // its download fails
		}
		fmt.Fprintf(&b, "  - name: %s\n    template: local:vztmpl/%s\n    memory: 128\n    rootfs:\n      size: 1G\n    volumes:\n      - name: data\n        size: 1G\n        mount: /srv/data\n", name, tmpl)
	}
	return b.String()
}

// Apps change in parallel (issue 13): twelve apps converge in one apply
// and go in one destroy, every volume kept; one app's failure does not
// stop the others, and the error names it.
func TestParallelApplyAndDestroy(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifestIn(t, "demo", manyApps(12, "app05")) // defaulted: rewrite edits it in place
	r := c.run("apply", "-f", m, "--auto-approve", "--skip-preflight")
	if r.code != ExitError || !strings.Contains(r.stderr, "app05") {
		t.Fatalf("apply with one failing app: exit %d\n%s", r.code, r.stderr)
	}
	st := c.status(m)
	for _, a := range st.Apps {
		if a.App != "app05" && (len(a.Containers) != 1 || a.Containers[0].Status != "running") {
			t.Errorf("app %s after apply: %+v", a.App, a.Containers)
		}
	}
	good := rewrite(t, m, manyApps(12, "")) // m, mended
	c.mustRun("apply", "-f", good, "--auto-approve", "--parallelism", "4")
	if r := c.run("plan", "-f", good); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s", r.code, r.stdout)
	}
	before := c.volumes()
	c.mustRun("destroy", "-f", good, "--auto-approve")
	after := c.volumes()
	if len(before) != 12 || len(after) != 12 {
		t.Fatalf("volumes before destroy %d, after %d, want 12 and 12", len(before), len(after))
	}
	for _, v := range after {
		if v.Holder != "keeper" {
			t.Errorf("volume %s/%s held by %s after destroy", v.App, v.Name, v.Holder)
		}
	}
	if n := len(c.srv.Cluster().Resources("vm")); n != 1 {
		t.Errorf("%d guests after destroy, want the keeper only", n)
	}
	if r := c.run("apply", "-f", good, "--auto-approve", "--parallelism", "0"); r.code != ExitError || !strings.Contains(r.stderr, "--parallelism") {
		t.Errorf("--parallelism 0: exit %d\n%s", r.code, r.stderr)
	}
}

// Scenario 13: a corral killed during destroy leaves the destroy task
// running; an apply right after waits for it and then recreates the app
// in one go, instead of failing once on the vanishing config.
func TestApplyAfterInterruptedDestroy(t *testing.T) {
	t.Parallel()
	c, m := appliedAlpha(t, pvetest.TimeScale(0.2)) // vzdestroy: 0.4 s
	srv := c.srv
	vmid := c.status(m).Apps[0].Containers[0].VMID
	// What destroy had done when it was killed: the volumes detached, the
	// container stopped, its destroy task started.
	auth := c.operatorAuth()
	conf := c.config(vmid)
	var mps []string
	for k := range conf {
		if strings.HasPrefix(k, "mp") {
			mps = append(mps, k)
		}
	}
	upid, err := srv.Cluster().StopCT(auth, "pve", vmid, map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := srv.Cluster().WaitTask(t.Context(), "pve", upid); err != nil || task.ExitStatus != "OK" {
		t.Fatalf("stop: %+v %v", task, err)
	}
	if err := srv.Cluster().UpdateCTConfig(auth, "pve", vmid, map[string]string{"delete": strings.Join(mps, ",")}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Cluster().DestroyCT(auth, "pve", vmid, map[string]string{"purge": "1"}); err != nil {
		t.Fatal(err)
	}
	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code != 0 {
		t.Fatalf("apply right after an interrupted destroy: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan: exit %d\n%s", r.code, r.stdout)
	}
	if len(c.volumes()) != 3 {
		t.Errorf("volumes: %+v", c.volumes())
	}
}

// A lease whose holder was a corral of this machine that was killed is
// taken over at once, not after it runs out.
func TestLockOfKilledLocalCorralTakenOver(t *testing.T) {
	t.Parallel()
	c, _ := appliedAlpha(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	k := c.keepers()[0]
	root := model.Auth{UserID: "root@pam"}
	conf, _, err := c.srv.Cluster().CTConfig(root, "pve", k, true, "")
	if err != nil {
		t.Fatal(err)
	}
	notes := plan.ParseKeeperNotes(conf["description"])
	notes.Lease = &plan.Lease{ID: "dead", Holder: fmt.Sprintf("me@%s:%d", host, dead.Process.Pid), Command: "apply", Since: time.Now(), Until: time.Now().Add(time.Hour)}
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", k, map[string]string{"description": notes.Render()}); err != nil {
		t.Fatal(err)
	}
	more := writeManifest(t, strings.Replace(threeVolumes("alpha"), "memory: 256", "memory: 384", 1))
	c.mustRun("apply", "-f", more, "--auto-approve", "--lock-timeout", "0")
}
