package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// These tests drive the real path end to end: the corral command line, the
// API client, HTTPS with a pinned certificate, the emulator, and the files
// the emulator keeps on disk for each volume.

// cluster is an emulator serving HTTPS on a loopback port.
type cluster struct {
	t   *testing.T
	srv *sim.Server
}

// newCluster starts an emulator (pvetest.Start, with opts) for the test.
func newCluster(t *testing.T, opts ...pvetest.Option) *cluster {
	t.Helper()
	return &cluster{t: t, srv: pvetest.Start(t, opts...).Server}
}

// connArgs are the flags that point corral at this emulator.
func (c *cluster) connArgs() []string {
	return []string{"--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().OperatorToken, "--fingerprint", c.srv.Fingerprint()}
}

type result struct {
	code           int
	stdout, stderr string
}

// needGuestExec stops the test when a run's stderr says guest commands
// cannot run on this machine: a skip, or a failure under
// CORRAL_REQUIRE_GUEST_EXEC (testenv.GuestExec).
func needGuestExec(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "guest exec unavailable") {
		testenv.Lackf(t, testenv.GuestExec, "guest exec unavailable here: %s", stderr)
	}
}

// run runs corral with args plus the connection flags (for verbs that take
// them) and returns what it printed. A command still running shortly
// before the test binary's deadline is stopped there (testenv.Context)
// and the test fails saying so, with what the command printed: a hang
// names the step it waited on instead of ending in the binary's timeout
// (TestComposeLocalExample hung until CI's 30 minutes, leaving no trace
// of what it waited for).
func (c *cluster) run(args ...string) result {
	c.t.Helper()
	full := append([]string{}, args...)
	switch args[0] {
	case "plan", "apply", "destroy", "status", "volumes", "move", "drain":
		full = append(full, c.connArgs()...)
	}
	var out, errb bytes.Buffer
	ctx := testenv.Context(c.t)
	code := Run(ctx, full, strings.NewReader(""), &out, &errb)
	if ctx.Err() != nil {
		// args[0] only: the others may hold a token.
		c.t.Errorf("corral %s was still running at the test's deadline and was stopped there; what it printed:\n%s%s", args[0], out.String(), errb.String())
	}
	return result{code, out.String(), errb.String()}
}

func (c *cluster) mustRun(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("corral %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// file returns the path on disk of a file inside a volume.
func (c *cluster) file(volid, name string) string {
	c.t.Helper()
	dir, err := c.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		c.t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// noLeaseIn fails the test if keeper's description still holds corral's
// lock lease: every apply that ended, ended by releasing it.
func (c *cluster) noLeaseIn(keeper int) {
	c.t.Helper()
	conf, _, err := c.srv.Cluster().CTConfig(model.Auth{UserID: "root@pam"}, "pve", keeper, true, "")
	if err != nil {
		c.t.Fatal(err)
	}
	if l := plan.ParseLease(conf["description"]); l != nil {
		c.t.Errorf("lease left in the keeper %d: %+v", keeper, l)
	}
}

// config reads a CT's config through the model.
func (c *cluster) config(vmid int) map[string]string {
	c.t.Helper()
	text, err := c.srv.Cluster().ConfigText(vmid)
	if err != nil {
		c.t.Fatal(err)
	}
	conf := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "[") {
			if strings.HasPrefix(line, "[") {
				break
			}
			continue
		}
		k, v, _ := strings.Cut(line, ": ")
		conf[k] = v
	}
	return conf
}

// status is `corral status -o json` decoded.
type statusJSON struct {
	Apps []struct {
		App     string   `json:"app"`
		Drift   string   `json:"drift"`
		Health  string   `json:"health"`
		Reasons []string `json:"reasons"`
		Rescue  *struct {
			VMID int `json:"rescue_vmid"`
		} `json:"rescue"`
		Containers []struct {
			VMID   int    `json:"vmid"`
			Status string `json:"status"`
			IP     string `json:"ip"`
		} `json:"containers"`
		Volumes []struct {
			Name   string `json:"name"`
			VolID  string `json:"volid"`
			Holder string `json:"holder"`
			Size   int64  `json:"size"`
		} `json:"volumes"`
	} `json:"apps"`
}

func (c *cluster) status(manifest string) statusJSON {
	c.t.Helper()
	r := c.mustRun("status", "-f", manifest, "-o", "json")
	var s statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		c.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	return s
}

// writeManifest writes a manifest in a new directory named demo that
// sets project: demo (unless text names its own project). The tests
// write each edit of "the manifest" as a new file, and an explicit
// project is what makes those files one declarer: under a defaulted
// project each path is another manifest, which may not change the first
// one's apps (docs/manifest.md, "Who declared an app"). Tests of the
// defaulted project use writeManifestIn.
func writeManifest(t *testing.T, text string) string {
	t.Helper()
	if !explicitProject.MatchString(text) {
		text = "project: demo\n" + text
	}
	return writeManifestIn(t, "demo", text)
}

// explicitProject matches a manifest that sets project:.
var explicitProject = regexp.MustCompile(`(?m)^project:`)

// writeManifestIn writes a manifest in a new directory named dir: project
// dir, unless the text says otherwise.
func writeManifestIn(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), dir, "corral.yaml")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const appManifest = `apps:
  - name: notes
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    cores: 1
    memory: MEMORY
    rootfs:
      size: 4G
    features:
      nesting: true
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
      - name: cache
        size: 512M
        mount: /var/cache/notes
        backup: false
        reclaim: delete
`

func manifestWith(t *testing.T, memory string) string {
	return writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", memory))
}

// appliedNotes is where most tests of a running app begin: an emulated
// cluster (with opts) on which app notes at 512 MB (manifestWith) is
// applied; it returns the cluster and the manifest's path.
func appliedNotes(t *testing.T, opts ...pvetest.Option) (*cluster, string) {
	t.Helper()
	c := newCluster(t, opts...)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	return c, m
}

// TestVolumesSurviveRecreate is the core promise: data written to a
// volume survives destroy and apply, on the same volid, while the old
// container's root file system is gone.
func TestVolumesSurviveRecreate(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")

	r := c.run("plan", "-f", m)
	if r.code != ExitChanges {
		t.Fatalf("plan before apply: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	st := c.status(m)
	app := st.Apps[0]
	if len(app.Containers) != 1 || app.Containers[0].Status != "running" || app.Drift != "no-op" {
		t.Fatalf("after apply: %+v", app)
	}
	vmid := app.Containers[0].VMID
	if !strings.HasPrefix(app.Containers[0].IP, "127.") {
		t.Errorf("running DHCP container's address = %q, want the emulator's loopback lease", app.Containers[0].IP)
	}
	vols := map[string]string{}
	for _, v := range app.Volumes {
		vols[v.Name] = v.VolID
		if v.Holder != "ct "+strconv.Itoa(vmid) {
			t.Errorf("volume %s held by %q, want ct %d", v.Name, v.Holder, vmid)
		}
	}
	if len(vols) != 2 {
		t.Fatalf("volumes: %+v", app.Volumes)
	}
	// Write data into the volume and into the container's root fs.
	if err := os.WriteFile(c.file(vols["data"], "keep.txt"), []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	rootfs := strings.SplitN(c.config(vmid)["rootfs"], ",", 2)[0]
	rootFile := c.file(rootfs, "root-only.txt")
	if err := os.WriteFile(rootFile, []byte("cattle"), 0o644); err != nil {
		t.Fatal(err)
	}

	// No-op plan exits 0.
	if r := c.run("plan", "-f", m); r.code != 0 || !strings.Contains(r.stdout, "No changes") {
		t.Fatalf("no-op plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	c.mustRun("destroy", "-f", m, "--auto-approve")
	st = c.status(m)
	if len(st.Apps[0].Containers) != 0 {
		t.Fatalf("containers after destroy: %+v", st.Apps[0].Containers)
	}
	for _, v := range st.Apps[0].Volumes {
		if v.Holder != "keeper" || v.VolID != vols[v.Name] {
			t.Errorf("after destroy, volume %s: %+v (want in keeper, volid %s)", v.Name, v, vols[v.Name])
		}
	}
	if _, err := os.Stat(rootFile); !os.IsNotExist(err) {
		t.Errorf("root fs file of the destroyed container still there: %v", err)
	}

	c.mustRun("apply", "-f", m, "--auto-approve")
	st = c.status(m)
	for _, v := range st.Apps[0].Volumes {
		if v.VolID != vols[v.Name] {
			t.Errorf("volume %s is %s after recreate, want %s", v.Name, v.VolID, vols[v.Name])
		}
	}
	got, err := os.ReadFile(c.file(vols["data"], "keep.txt"))
	if err != nil || string(got) != "precious" {
		t.Fatalf("data after recreate: %q, %v", got, err)
	}
	newVMID := st.Apps[0].Containers[0].VMID
	conf := c.config(newVMID)
	newRoot := strings.SplitN(conf["rootfs"], ",", 2)[0]
	if _, err := os.Stat(c.file(newRoot, "root-only.txt")); !os.IsNotExist(err) {
		t.Errorf("new container's root fs has the old file: %v", err)
	}
	mounted := false
	for k, v := range conf {
		if strings.HasPrefix(k, "mp") && strings.HasPrefix(v, vols["data"]+",") && strings.Contains(v, "mp=/srv/data") {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("data volume not mounted at /srv/data: %v", conf)
	}
}

// TestInPlaceUpdateKeepsContainer: a memory change is an update of the same
// container, not a replace.
func TestInPlaceUpdateKeepsContainer(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.mustRun("apply", "-f", manifestWith(t, "512"), "--auto-approve")
	vmid := c.status(manifestWith(t, "512")).Apps[0].Containers[0].VMID

	m := manifestWith(t, "1024")
	r := c.run("plan", "-f", m, "-o", "json")
	if r.code != ExitChanges {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var pj struct {
		Changes []struct {
			Action string `json:"action"`
			Config []struct{ Key, Old, New string }
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil {
		t.Fatal(err)
	}
	if len(pj.Changes) != 1 || pj.Changes[0].Action != "update" {
		t.Fatalf("plan: %s", r.stdout)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	st := c.status(m)
	if got := st.Apps[0].Containers[0].VMID; got != vmid {
		t.Errorf("VMID changed from %d to %d on an in-place update", vmid, got)
	}
	if got := c.config(vmid)["memory"]; got != "1024" {
		t.Errorf("memory = %q, want 1024", got)
	}
	if st.Apps[0].Drift != "no-op" {
		t.Errorf("drift after apply: %s", st.Apps[0].Drift)
	}
}

// TestTemplateChangeReplacesAndKeepsData: a new template replaces the
// container; the volumes move over with their data.
func TestTemplateChangeReplacesAndKeepsData(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	st := c.status(m)
	old := st.Apps[0].Containers[0].VMID
	data := ""
	for _, v := range st.Apps[0].Volumes {
		if v.Name == "data" {
			data = v.VolID
		}
	}
	os.WriteFile(c.file(data, "db"), []byte("rows"), 0o644)

	// A template the node lacks: the plan says it is downloaded, and
	// apply downloads it with the operator's token (its role holds
	// Datastore.AllocateTemplate, as corral doctor --print-setup's does).
	m2 := writeManifest(t, strings.ReplaceAll(strings.ReplaceAll(appManifest, "MEMORY", "512"),
		"debian-12-standard_12.12-1_amd64.tar.zst", "debian-13-standard_13.1-2_amd64.tar.zst"))
	r := c.run("plan", "-f", m2)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "replace") || !strings.Contains(r.stdout, "template local:vztmpl/debian-13-standard_13.1-2_amd64.tar.zst is not on node pve: it is downloaded first") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.mustRun("apply", "-f", m2, "--auto-approve"); strings.Contains(r.stderr, "preflight") {
		t.Errorf("apply:\n%s", r.stderr)
	}
	st = c.status(m2)
	if len(st.Apps[0].Containers) != 1 {
		t.Fatalf("containers: %+v", st.Apps[0].Containers)
	}
	if st.Apps[0].Containers[0].VMID == old {
		t.Logf("replacement reused VMID %d", old)
	}
	got, err := os.ReadFile(c.file(data, "db"))
	if err != nil || string(got) != "rows" {
		t.Fatalf("data after replace: %q, %v", got, err)
	}
	if st.Apps[0].Drift != "no-op" {
		t.Errorf("drift: %s", st.Apps[0].Drift)
	}
}

// TestDestroyDeleteVolumes frees reclaim: delete volumes only.
func TestDestroyDeleteVolumes(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	vols := map[string]string{}
	for _, v := range c.status(m).Apps[0].Volumes {
		vols[v.Name] = v.VolID
	}
	r := c.mustRun("destroy", "-f", m, "--auto-approve", "--delete-volumes", "-o", "json")
	var out struct {
		Destroyed []int    `json:"destroyed"`
		Freed     []string `json:"freed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if len(out.Destroyed) != 1 || len(out.Freed) != 1 || out.Freed[0] != vols["cache"] {
		t.Fatalf("destroy result %+v, want the cache volume %s freed", out, vols["cache"])
	}
	if _, err := c.srv.Cluster().VolumePath("pve", vols["cache"]); err == nil {
		t.Errorf("cache volume %s still exists", vols["cache"])
	}
	if _, err := os.Stat(c.file(vols["data"], ".")); err != nil {
		t.Errorf("retained data volume gone: %v", err)
	}
}

// TestApplyNeedsApprovalWithoutTerminal: a script that forgets
// --auto-approve changes nothing.
func TestApplyNeedsApprovalWithoutTerminal(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	r := c.run("apply", "-f", m)
	if r.code != ExitError || !strings.Contains(r.stderr, "--auto-approve") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if st := c.status(m); len(st.Apps[0].Containers) != 0 {
		t.Fatalf("apply without approval created %+v", st.Apps[0].Containers)
	}
}

// TestApplyJSONEvents: -o json gives one JSON object per line, ending with
// a summary.
func TestApplyJSONEvents(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.mustRun("apply", "-f", manifestWith(t, "512"), "--auto-approve", "-o", "json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	types := map[string]int{}
	var last map[string]any
	for _, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		types[ev["type"].(string)]++
		last = ev
	}
	if types["plan"] != 1 || types["step_start"] == 0 || types["step_end"] != types["step_start"] || last["type"] != "summary" || last["ok"] != true {
		t.Fatalf("events %v, last %v", types, last)
	}
}

// TestSecretsNeverPrinted: the root password from ${env:…} and the API
// token secret appear nowhere in corral's output, even at debug level.
func TestSecretsNeverPrinted(t *testing.T) {
	c := newCluster(t)
	const password = "Sup3r-Secret-Pa55"
	t.Setenv("NOTES_ROOT_PW", password)
	m := writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512")+"    password: ${env:NOTES_ROOT_PW}\n")
	_, secret, _ := strings.Cut(c.srv.Credentials().OperatorToken, "=")
	var all strings.Builder
	for _, args := range [][]string{
		{"validate", "-f", m},
		{"--log-level", "debug", "plan", "-f", m},
		{"--log-level", "debug", "apply", "-f", m, "--auto-approve"},
		{"--log-level", "debug", "status", "-f", m, "-o", "json"},
		{"--log-level", "debug", "destroy", "-f", m, "--auto-approve"},
	} {
		var r result
		if args[0] == "--log-level" {
			full := append(append([]string{}, args...), c.connArgs()...)
			var out, errb bytes.Buffer
			r.code = Run(context.Background(), full, strings.NewReader(""), &out, &errb)
			r.stdout, r.stderr = out.String(), errb.String()
		} else {
			r = c.run(args...)
		}
		if r.code != 0 && r.code != ExitChanges {
			t.Fatalf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
		all.WriteString(r.stdout + r.stderr)
	}
	for name, s := range map[string]string{"root password": password, "token secret": secret} {
		if strings.Contains(all.String(), s) {
			t.Errorf("%s appears in corral's output", name)
		}
	}
	if !strings.Contains(all.String(), "DEBUG") {
		t.Errorf("no debug logging seen; the check above proves nothing")
	}
}

// TestValidateReportsPosition: a bad manifest fails with file:line:col.
func TestValidateReportsPosition(t *testing.T) {
	t.Parallel()
	m := writeManifestIn(t, "demo", "apps:\n  - name: x\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    memory: lots\n") // positions as written
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"validate", "-f", m}, strings.NewReader(""), &out, &errb)
	if code != ExitError || !regexp.MustCompile(`corral\.yaml:4:\d+`).MatchString(errb.String()) {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	out.Reset()
	code = Run(context.Background(), []string{"validate", "-f", m, "-o", "json"}, strings.NewReader(""), &out, &errb)
	var v struct {
		Valid    bool     `json:"valid"`
		Problems []string `json:"problems"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Valid || len(v.Problems) == 0 || code != ExitError {
		t.Fatalf("json: %s (%v), exit %d", out.String(), err, code)
	}
}

func TestSchemaIsJSON(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"schema"}, nil, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v["$schema"] == nil {
		t.Fatalf("schema: %v", err)
	}
}

// TestDestroyRefusesUnmanagedVolume: a volume someone added by hand to the
// app's container would be freed with it, so destroy refuses and changes
// nothing.
func TestDestroyRefusesUnmanagedVolume(t *testing.T) {
	t.Parallel()
	c, m := appliedNotes(t)
	vmid := c.status(m).Apps[0].Containers[0].VMID
	root := model.Auth{UserID: "root@pam"}
	if err := c.srv.Cluster().UpdateCTConfig(root, "pve", vmid, map[string]string{"mp5": "local-lvm:1,mp=/srv/by-hand"}); err != nil {
		t.Fatal(err)
	}
	r := c.run("destroy", "-f", m, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stdout, "does not manage") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st := c.status(m); len(st.Apps[0].Containers) != 1 {
		t.Fatalf("container gone after a refused destroy: %+v", st.Apps[0])
	}
}

// TestExamplesValidateAndPlan: every example validates and plans against
// the emulator (steps that need the internet are not run here).
func TestExamplesValidateAndPlan(t *testing.T) {
	for _, v := range []string{"OPENCODE_GO_API_KEY", "LITELLM_MASTER_KEY", "OPENROUTER_API_KEY", "TELEGRAM_BOT_TOKEN"} {
		t.Setenv(v, "test-"+strings.ToLower(v))
	}
	dirs, err := filepath.Glob("../../examples/*/corral.yaml")
	if err != nil || len(dirs) < 3 {
		t.Fatalf("examples: %v %v", dirs, err)
	}
	c := newCluster(t)
	for _, m := range dirs {
		if r := c.run("validate", "-f", m); r.code != 0 {
			t.Errorf("validate %s: exit %d\n%s", m, r.code, r.stderr)
		}
		if r := c.run("plan", "-f", m); r.code != ExitChanges {
			t.Errorf("plan %s: exit %d\n%s%s", m, r.code, r.stdout, r.stderr)
		}
	}
}

// TestApplyPreflightStopsBeforeChanges: a token without
// Datastore.AllocateSpace is stopped by apply's preflight, naming what is
// missing, and nothing is created.
func TestApplyPreflightStopsBeforeChanges(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cl := c.srv.Cluster()
	root := model.Auth{UserID: "root@pam"}
	var privs []string
	for _, p := range model.OperatorPrivileges {
		if p != "Datastore.AllocateSpace" {
			privs = append(privs, p)
		}
	}
	if err := cl.AddRole("Narrow", privs); err != nil {
		t.Fatal(err)
	}
	if err := cl.AddUser("narrow@pve", "", nil); err != nil {
		t.Fatal(err)
	}
	_, secret, _, err := cl.AddToken("narrow@pve", "tok", true, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.UpdateACL(root, model.ACLUpdate{Path: "/", Roles: []string{"Narrow"}, Users: []string{"narrow@pve"}, Tokens: []string{"narrow@pve!tok"}, Propagate: true}); err != nil {
		t.Fatal(err)
	}
	m := manifestWith(t, "512")
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"apply", "-f", m, "--auto-approve", "--endpoint", c.srv.URL(),
		"--api-token", "narrow@pve!tok=" + secret, "--fingerprint", c.srv.Fingerprint()}, strings.NewReader(""), &out, &errb)
	if code != ExitError || !strings.Contains(errb.String(), "preflight") || !strings.Contains(errb.String(), "Datastore.AllocateSpace") || strings.Contains(errb.String(), "preflight: preflight") {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errb.String())
	}
	if strings.Contains(out.String()+errb.String(), secret) {
		t.Fatal("token secret printed")
	}
	if st := c.status(m); len(st.Apps[0].Containers) != 0 || len(st.Apps[0].Volumes) != 0 {
		t.Fatalf("preflight failure changed things: %+v", st.Apps[0])
	}
}

// TestPrintedSetupIsExactlyEnough (issue 6): with the token setup that
// `doctor --print-setup` prints, apply works; with any one privilege
// taken out, apply stops before its first change and names it.
func TestPrintedSetupIsExactlyEnough(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	r := c.mustRun("doctor", "-f", m, "--print-setup", "-o", "json")
	var setup struct {
		Privileges []string `json:"privileges"`
		ACLs       []struct {
			Path      string `json:"path"`
			Propagate bool   `json:"propagate"`
		} `json:"acls"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &setup); err != nil || len(setup.Privileges) == 0 {
		t.Fatalf("setup: %v\n%s", err, r.stdout)
	}
	cl := c.srv.Cluster()
	root := model.Auth{UserID: "root@pam"}
	// token makes a privsep token whose role holds privs, granted on the
	// printed paths to both the user and the token.
	token := func(name string, privs []string) string {
		if err := cl.AddRole(name, privs); err != nil {
			t.Fatal(err)
		}
		user := strings.ToLower(name) + "@pve"
		if err := cl.AddUser(user, "", nil); err != nil {
			t.Fatal(err)
		}
		_, secret, _, err := cl.AddToken(user, "tok", true, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range setup.ACLs {
			if err := cl.UpdateACL(root, model.ACLUpdate{Path: a.Path, Roles: []string{name}, Users: []string{user}, Tokens: []string{user + "!tok"}, Propagate: a.Propagate}); err != nil {
				t.Fatal(err)
			}
		}
		return user + "!tok=" + secret
	}
	apply := func(tok string) result {
		var out, errb bytes.Buffer
		code := Run(context.Background(), []string{"apply", "-f", m, "--auto-approve", "--endpoint", c.srv.URL(),
			"--api-token", tok, "--fingerprint", c.srv.Fingerprint()}, strings.NewReader(""), &out, &errb)
		return result{code, out.String(), errb.String()}
	}
	for i, p := range setup.Privileges {
		if p == "Datastore.AllocateTemplate" || p == "VM.Migrate" {
			// VM.Migrate: granted for a later move (corral move,
			// drain, a change of node:); doctor warns without it.
			// Granted for the next template change (apply downloads a
			// template the node lacks); this manifest's template is on
			// the node, so apply works without it (doctor warns).
			continue
		}
		var privs []string
		for _, q := range setup.Privileges {
			if q != p {
				privs = append(privs, q)
			}
		}
		r := apply(token(fmt.Sprintf("Minus%d", i), privs))
		if r.code != ExitError || !strings.Contains(r.stderr, "preflight") || !strings.Contains(r.stderr, p) {
			t.Errorf("without %s: exit %d, want a preflight stop naming it\n%s", p, r.code, r.stderr)
		}
		if st := c.status(m); len(st.Apps[0].Containers) != 0 || len(st.Apps[0].Volumes) != 0 {
			t.Fatalf("without %s apply changed things: %+v", p, st.Apps[0])
		}
	}
	if r := apply(token("Exact", setup.Privileges)); r.code != 0 {
		t.Fatalf("with the printed setup: exit %d\n%s", r.code, r.stderr)
	}
}

// TestOfflineNode: with one node down, plan and apply go on for the apps
// elsewhere, leave the app on that node alone and say so; a request for
// the down node fails as PVE's proxy does.
func TestOfflineNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(2))
	srv := c.srv
	one := writeManifest(t, strings.Replace(strings.ReplaceAll(appManifest, "MEMORY", "512"), "  - name: notes\n", "  - name: notes\n    node: pve1\n", 1))
	c.mustRun("apply", "-f", one, "--auto-approve")
	if err := srv.Cluster().SetNodeOnline("pve1", false); err != nil {
		t.Fatal(err)
	}
	two := writeManifest(t, strings.Replace(strings.ReplaceAll(appManifest, "MEMORY", "512"), "  - name: notes\n", "  - name: notes\n    node: pve1\n", 1)+
		"  - name: second\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n")
	r := c.run("plan", "-f", two)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "node pve1 is offline") || !strings.Contains(r.stdout, "app second (create on pve2)") {
		t.Fatalf("plan with pve1 down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Issue 26, scenario 8: the app on the offline node is named as not
	// checked, never "no changes", and no warning reads its unread config
	// (it is unprivileged, as the manifest says).
	if !strings.Contains(r.stdout, "? app notes: not checked: its container") || strings.Contains(r.stdout, "becomes") ||
		strings.Contains(r.stdout, "app notes (ct") || !strings.Contains(r.stdout, "Not checked: app notes (node pve1)") {
		t.Fatalf("plan with pve1 down does not say notes is unchecked, or warns about what it did not read:\n%s", r.stdout)
	}
	// apply makes the other app's changes, then says what it could not
	// check and exits 1: not "Apply complete".
	r = c.run("apply", "-f", two, "--auto-approve")
	if r.code != 1 || strings.Contains(r.stderr, "Apply complete") || !strings.Contains(r.stderr, "apply incomplete") || !strings.Contains(r.stderr, "app notes: its container") {
		t.Fatalf("apply with pve1 down: exit %d, want 1 naming notes\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, a := range c.status(two).Apps {
		if a.App == "notes" && a.Drift != "unchecked" {
			t.Errorf("status of notes on the offline node: drift %q, want unchecked", a.Drift)
		}
	}
	r = c.run("plan", "-f", two)
	if r.code != ExitChanges || strings.Contains(r.stdout, "No changes") || !strings.Contains(r.stdout, "Not checked: app notes (node pve1). corral cannot tell") {
		t.Fatalf("plan with only the offline app left: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if err := srv.Cluster().SetNodeOnline("pve1", true); err != nil {
		t.Fatal(err)
	}
	if r := c.run("plan", "-f", two); r.code != 0 {
		t.Fatalf("plan with both nodes up: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
