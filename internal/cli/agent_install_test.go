package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/testenv"
)

// corralBinary is the corral binary that install copies into the
// agent's container: this test binary, linked as corral in TestMain's
// temporary directory once per test process (testenv.SelfAs), which
// TestMain runs as corral (cli.Main) when started under that name. Under
// -race the installed agent runs under the race detector too.
func corralBinary(t *testing.T) string {
	t.Helper()
	selfCorral.once.Do(func() {
		selfCorral.path, selfCorral.err = testenv.SelfAs(filepath.Dir(os.Getenv("XDG_CONFIG_HOME")), "corral")
	})
	if selfCorral.err != nil {
		t.Fatal(selfCorral.err)
	}
	return selfCorral.path
}

var selfCorral struct {
	once sync.Once
	path string
	err  error
}

// rootArgs point corral at the emulator with root@pam's token, which may
// create the agent's user, role and token.
func (c *cluster) rootArgs() []string {
	return []string{"--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().RootToken, "--fingerprint", c.srv.Fingerprint()}
}

// agentCTs are the containers of the agent's project for project.
func (c *cluster) agentCTs(project string) []int {
	c.t.Helper()
	rs, err := c.pveClient().ClusterResources(context.Background(), "vm")
	if err != nil {
		c.t.Fatal(err)
	}
	var out []int
	for _, r := range rs {
		if strings.Contains(r.Tags, "corral-project-"+agent.ProjectOf(project)) {
			out = append(out, r.VMID)
		}
	}
	return out
}

// ctFile reads a file of a container's root file system on the
// emulator's disk.
func (c *cluster) ctFile(vmid int, name string) (string, os.FileInfo) {
	c.t.Helper()
	volid, _, _ := strings.Cut(c.config(vmid)["rootfs"], ",")
	p := c.file(volid, name)
	fi, err := os.Stat(p)
	if err != nil {
		c.t.Fatalf("%s in CT %d: %v", name, vmid, err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		c.t.Fatal(err)
	}
	return string(b), fi
}

// agentProcesses are the host's processes running the installed corral
// agent that listens at url's address (the emulator's guests share the
// host's PID namespace).
func agentProcesses(t *testing.T, url string) []int {
	t.Helper()
	listen := strings.TrimPrefix(url, "http://")
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 2 && args[0] == agent.InstalledBin && args[1] == "agent" && strings.Contains(string(b), "\x00"+listen+"\x00") && descendsFromUs(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// descendsFromUs says whether pid is a descendant of this test process:
// the emulator runs in it, so its containers' processes are, and another
// test binary's agent on the same address (its emulator may share the
// loopback block on another guest port) is not.
func descendsFromUs(pid int) bool {
	for range 64 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 {
			return false
		}
		ppid, _ := strconv.Atoi(f[1])
		if ppid == os.Getpid() {
			return true
		}
		if ppid <= 1 {
			return false
		}
		pid = ppid
	}
	return false
}

// waitFor is testenv.WaitFor that, if cond never holds (a stuck agent),
// also shows explain().
func waitFor(t *testing.T, what string, cond func() bool, explain func() string) {
	t.Helper()
	defer func() {
		if t.Failed() {
			t.Log(explain())
		}
	}()
	testenv.WaitFor(t, what, cond)
}

type installedStatus struct {
	Status agent.Status  `json:"status"`
	Events []agent.Event `json:"events"`
}

// corral agent install, end to end against the emulator: refused with
// the pveum script for a token that may not manage users (nothing made);
// with root's token it leaves a running agent in a container of its
// own, with a token of its own, that repairs a drift made through the
// API by itself (the event in its /api/v1/events, read with corral agent
// status -f); a second install replaces the agent in the same container;
// the token's secret and the agent's bearer token appear in no output or
// log; uninstall removes the container and the token.
func TestAgent_install(t *testing.T) {
	// Serial: agentProcesses counts the agents at an address, and
	// isolated CTs of parallel tests' emulators share bridge addresses.
	realContainers(t, "the agent's own process in its container")
	c := newGuestCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	needGuestExec(t, c.run("exec", "notes", "-f", m, "--endpoint", c.srv.URL(), "--api-token", c.srv.Credentials().OperatorToken, "--fingerprint", c.srv.Fingerprint(), "--", "true").stderr)
	bin := corralBinary(t)
	install := func(conn []string) result {
		args := append([]string{"agent", "install", "-f", m, "--binary", bin, "--interval", "1s"}, conn...)
		return runCorral(t, args...)
	}

	// The operator token may not create users: the script, and nothing made.
	r := install(c.connArgs())
	if r.code != ExitError || !strings.Contains(r.stdout, "pveum role add CorralAgent-demo") || !strings.Contains(r.stdout, "pveum user token add corral-agent-demo@pve agent") ||
		!strings.Contains(r.stderr, "CORRAL_AGENT_API_TOKEN=corral-agent-demo@pve!agent=<secret>") {
		t.Fatalf("install with the operator token: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if cts := c.agentCTs("demo"); len(cts) != 0 {
		t.Fatalf("a refused install made containers %v", cts)
	}

	// With root's token: installed; detached where the container has no
	// systemd (today's emulator templates), and said so.
	var outputs []string
	r = install(c.rootArgs())
	outputs = append(outputs, r.stdout, r.stderr)
	started := "systemd"
	if strings.Contains(r.stdout, "started by detached") {
		started = "detached"
	}
	if r.code != 0 || (started == "detached") != strings.Contains(r.stderr, "no systemd as its init") || !strings.Contains(r.stdout, "started by "+started) {
		t.Fatalf("install: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	cts := c.agentCTs("demo")
	if len(cts) != 1 {
		t.Fatalf("agent containers %v, want one", cts)
	}
	vmid := cts[0]
	env, fi := c.ctFile(vmid, "etc/corral/agent/agent.env")
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("agent.env mode %o, want 600", fi.Mode().Perm())
	}
	vars := map[string]string{}
	for _, line := range strings.Split(env, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = envFileUnquote(v)
		}
	}
	tokenID, secret, _ := strings.Cut(vars["PROXMOX_VE_API_TOKEN"], "=")
	bearer := vars["CORRAL_AGENT_TOKEN"]
	if tokenID != "corral-agent-demo@pve!agent" || len(secret) < 16 || len(bearer) < 16 {
		t.Fatalf("the agent's credentials: token %q (secret %d chars), bearer %d chars", tokenID, len(secret), len(bearer))
	}
	if unit, _ := c.ctFile(vmid, "etc/systemd/system/corral-agent.service"); !strings.Contains(unit, "Restart=always") ||
		!strings.Contains(unit, "EnvironmentFile="+agent.InstalledEnvFile) || !strings.Contains(unit, `"--mode" "reconcile"`) {
		t.Errorf("unit:\n%s", unit)
	}
	// The agent's token holds the manifest's privileges, not root's.
	perms, err := c.pveClient().Permissions(context.Background(), "/vms", tokenID)
	if err != nil {
		t.Fatal(err)
	}
	if !perms.Has("/vms", "VM.Config.Memory") || perms.Has("/vms", "Permissions.Modify") {
		t.Errorf("the agent's token's privileges on /vms: %v", perms["/vms"])
	}

	agentLogText := func() string {
		p := c.file(strings.Split(c.config(vmid)["rootfs"], ",")[0], strings.TrimPrefix(agent.InstalledLog, "/"))
		b, _ := os.ReadFile(p)
		return "the agent's log:\n" + string(b)
	}
	// A drift made through the API is repaired by the installed agent.
	appVMID := c.drift(m, "1024")
	waitFor(t, "the installed agent repairs the drift", func() bool { return c.config(appVMID)["memory"] == "512" }, agentLogText)
	status := func() installedStatus {
		t.Helper()
		r := runCorral(t, append([]string{"agent", "status", "-f", m, "-o", "json"}, c.rootArgs()...)...)
		outputs = append(outputs, r.stdout, r.stderr)
		var st installedStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil {
			t.Fatalf("agent status -f: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return st
	}
	waitFor(t, "the reconcile event in the installed agent's /api/v1/events", func() bool {
		return hasEvent(status().Events, "", "reconciled")
	}, agentLogText)
	st := status()
	if st.Status.Mode != "reconcile" || len(st.Status.Apps) != 1 || st.Status.Apps[0].Name != "notes" {
		t.Errorf("the installed agent's status: %+v", st.Status)
	}
	text := runCorral(t, append([]string{"agent", "status", "-f", m}, c.rootArgs()...)...)
	outputs = append(outputs, text.stdout, text.stderr)
	if text.code != 0 || !strings.Contains(text.stdout, "reconcile mode") {
		t.Errorf("agent status -f: exit %d\n%s%s", text.code, text.stdout, text.stderr)
	}
	url := strings.TrimSpace(func() string { s, _ := c.ctFile(vmid, "etc/corral/agent/url"); return s }())
	first := agentProcesses(t, url)
	if len(first) != 1 {
		t.Fatalf("agent processes %v, want one", first)
	}

	// A binary for another architecture is refused, and the agent in
	// place keeps running.
	fake := filepath.Join(t.TempDir(), "corral-arm64")
	if err := os.WriteFile(fake, armELFHeader(), 0o755); err != nil {
		t.Fatal(err)
	}
	r = runCorral(t, append([]string{"agent", "install", "-f", m, "--binary", fake}, c.rootArgs()...)...)
	if r.code != ExitError || !strings.Contains(r.stderr, "is a arm64 binary and the agent's container") || !strings.Contains(r.stderr, "is amd64") {
		t.Errorf("install of an arm64 binary: exit %d\n%s", r.code, r.stderr)
	}
	if procs := agentProcesses(t, url); len(procs) != 1 || procs[0] != first[0] {
		t.Errorf("after the refused install: agent processes %v, want %v", procs, first)
	}

	// Again (-o json, with the debug log of every API call on stderr):
	// the same container, a new token, one agent (the old one stopped),
	// and it still repairs drift.
	r = install(append([]string{"-o", "json", "--log-level", "debug"}, c.rootArgs()...))
	outputs = append(outputs, r.stdout, r.stderr)
	var res agent.InstallResult
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil {
		t.Fatalf("second install -o json: exit %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "/access/users/corral-agent-demo@pve/token/agent") {
		t.Errorf("the debug log does not show the token's creation:\n%s", r.stderr)
	}
	if res.VMID != vmid || res.URL != url || res.Started != started || res.TokenID != tokenID || !res.TokenMade || res.Project != "demo" {
		t.Errorf("install -o json: %+v", res)
	}
	if cts := c.agentCTs("demo"); len(cts) != 1 || cts[0] != vmid {
		t.Errorf("after the second install: agent containers %v, want [%d]", cts, vmid)
	}
	second := agentProcesses(t, url)
	if len(second) != 1 || second[0] == first[0] {
		t.Errorf("agent processes %v after the second install (first %v): want one new one", second, first)
	}
	env2, _ := c.ctFile(vmid, "etc/corral/agent/agent.env")
	if env2 == env {
		t.Errorf("the second install did not renew the agent's token")
	}
	c.drift(m, "2048")
	waitFor(t, "the reinstalled agent repairs the drift", func() bool { return c.config(appVMID)["memory"] == "512" }, agentLogText)

	// No secret in any output, the agent's log or its API.
	log := ""
	if started == "detached" { // under systemd the log is in the journal
		log, _ = c.ctFile(vmid, strings.TrimPrefix(agent.InstalledLog, "/"))
		if !strings.Contains(log, `"msg":"reconciled`) {
			t.Errorf("the agent's log has no reconcile:\n%s", log)
		}
	}
	st = status()
	api, _ := json.Marshal(st)
	outputs = append(outputs, log, string(api))
	for _, line := range strings.Split(env2, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && (k == "PROXMOX_VE_API_TOKEN" || k == "CORRAL_AGENT_TOKEN") {
			_, s, _ := strings.Cut(envFileUnquote(v), "=")
			if k == "CORRAL_AGENT_TOKEN" {
				s = envFileUnquote(v)
			}
			for _, secret := range []string{s, secret, bearer} {
				for i, out := range outputs {
					if strings.Contains(out, secret) {
						t.Errorf("output %d shows a secret (%s):\n%s", i, k, out)
					}
				}
			}
		}
	}

	// Uninstall: the container and the token go, the agent with them.
	r = runCorral(t, append([]string{"agent", "uninstall", "-f", m, "-o", "json"}, c.rootArgs()...)...)
	var un struct {
		Project      string `json:"project"`
		TokenID      string `json:"token_id"`
		TokenDeleted bool   `json:"token_deleted"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &un); r.code != 0 || err != nil || !un.TokenDeleted || un.TokenID != tokenID || un.Project != "demo" {
		t.Fatalf("uninstall -o json: exit %d %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	if cts := c.agentCTs("demo"); len(cts) != 0 {
		t.Errorf("after uninstall: agent containers %v", cts)
	}
	if procs := agentProcesses(t, url); len(procs) != 0 {
		t.Errorf("after uninstall: agent processes %v", procs)
	}
	if toks, err := c.pveRoot().Tokens(context.Background(), "corral-agent-demo@pve"); err != nil || len(toks) != 0 {
		t.Errorf("after uninstall: tokens %v %v", toks, err)
	}
	r = runCorral(t, append([]string{"agent", "status", "-f", m}, c.rootArgs()...)...)
	if r.code != ExitError || !strings.Contains(r.stderr, "is it installed? corral agent install -f "+m) {
		t.Errorf("agent status -f after uninstall: exit %d\n%s", r.code, r.stderr)
	}
}

func (c *cluster) pveRoot() *pve.Client {
	c.t.Helper()
	pc := pvetest.Client(c.t, c.srv, c.srv.Credentials().RootToken)
	return pc
}

// corral agent install --git: the installed agent pulls the manifest
// from a repository (served over HTTP on the loopback by git's own
// http-backend; no network), applies a new commit on its own, and
// refuses a commit whose manifest is invalid, keeping the last good one.
func TestAgent_installGit(t *testing.T) {
	t.Parallel()
	c := newGuestCluster(t)
	repo := newGitRepo(t)
	backend, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(backend, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	h := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(repo.bare), "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	// Where the emulator's CTs are isolated, they reach the host's
	// server through the bridge gateway, as a CT reaches a server on its LAN.
	gitAddr, err := c.srv.ExposeToGuests(9418, strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	manifestAt := func(memory string) string {
		return "project: demo\n" + strings.ReplaceAll(appManifest, "MEMORY", memory)
	}
	a := repo.commit(manifestAt("512"), "notes at 512 MiB")
	m := writeManifest(t, manifestAt("512"))
	bin := corralBinary(t)
	// A password in the URL (the backend asks for none) is never shown
	// nor written where others read it.
	const gitSecret = "hunter2secret"
	r := runCorral(t, append([]string{"agent", "install", "-f", m, "--binary", bin, "--interval", "1s", "-o", "json",
		"--git", "http://deploy:" + gitSecret + "@" + gitAddr + "/notes.git", "--git-ref", "main"}, c.rootArgs()...)...)
	needGuestExec(t, r.stderr)
	if r.code != 0 {
		t.Fatalf("install --git: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { runCorral(t, append([]string{"agent", "uninstall", "-f", m}, c.rootArgs()...)...) })
	var res agent.InstallResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Git != "http://deploy:xxxxx@"+gitAddr+"/notes.git" || strings.Contains(r.stderr, gitSecret) {
		t.Errorf("install -o json: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	vmid := c.agentCTs("demo")[0]
	// At the end, when the agent has pulled three commits.
	defer c.assertSecretOnlyInEnvFile(vmid, res.URL, gitSecret)
	agentLogText := func() string {
		b, _ := os.ReadFile(c.file(strings.Split(c.config(vmid)["rootfs"], ",")[0], strings.TrimPrefix(agent.InstalledLog, "/")))
		return "the agent's log:\n" + string(b)
	}
	var st installedStatus
	status := func() installedStatus {
		t.Helper()
		r := runCorral(t, append([]string{"agent", "status", "-f", m, "-o", "json"}, c.rootArgs()...)...)
		var st installedStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); r.code != 0 || err != nil {
			t.Fatalf("agent status -f: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return st
	}
	memory := func() string {
		st = status()
		if len(st.Status.Apps) == 0 || st.Status.Apps[0].VMID == 0 {
			return ""
		}
		return c.config(st.Status.Apps[0].VMID)["memory"]
	}
	waitFor(t, "the agent creates the app from commit "+a, func() bool {
		return memory() == "512" && st.Status.Git != nil && st.Status.Git.Commit == a
	}, agentLogText)

	b := repo.commit(manifestAt("1024"), "notes at 1 GiB")
	waitFor(t, "the agent applies commit "+b, func() bool {
		return memory() == "1024" && st.Status.Git.Commit == b
	}, agentLogText)

	bad := repo.commit(manifestAt("a lot"), "broken")
	waitFor(t, "the agent refuses commit "+bad, func() bool {
		st = status()
		return st.Status.Git.Head == bad && hasEvent(st.Events, "", "git commit "+bad[:12]+" is not valid")
	}, agentLogText)
	if st.Status.Git.Commit != b || memory() != "1024" {
		t.Errorf("after the bad commit: git %+v, memory %s", st.Status.Git, memory())
	}
	text := runCorral(t, append([]string{"agent", "status", "-f", m}, c.rootArgs()...)...)
	if !strings.Contains(text.stdout, "at commit "+b) || !strings.Contains(text.stdout, "commit "+bad+" is not applied") {
		t.Errorf("agent status -f:\n%s", text.stdout)
	}
}

// assertSecretOnlyInEnvFile: of the agent's files in container vmid
// (its directory with the run script, its unit, its state with the Git
// checkout, its log) only the 0600 env file holds secret, and so does no
// running agent's command line that the test can see (agentProcesses
// finds the agent only where its process stays a descendant of the
// test's; the run script and unit hold its command line in any case).
func (c *cluster) assertSecretOnlyInEnvFile(vmid int, url, secret string) {
	c.t.Helper()
	volid, _, _ := strings.Cut(c.config(vmid)["rootfs"], ",")
	seen := 0
	for _, top := range []string{agent.InstalledDir, agent.InstalledUnit, agent.InstalledState, agent.InstalledLog} {
		filepath.WalkDir(c.file(volid, strings.TrimPrefix(top, "/")), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			seen++
			b, _ := os.ReadFile(p)
			fi, _ := d.Info()
			if strings.Contains(string(b), secret) && (!strings.HasSuffix(p, agent.InstalledEnvFile) || fi.Mode().Perm() != 0o600) {
				c.t.Errorf("%s (mode %o) in the agent's container holds the secret", p, fi.Mode().Perm())
			}
			return nil
		})
	}
	if seen < 10 {
		c.t.Errorf("only %d files of the agent's found in CT %d", seen, vmid)
	}
	for _, pid := range agentProcesses(c.t, url) {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); strings.Contains(string(b), secret) {
			c.t.Errorf("the agent's command line holds the secret: %q", b)
		}
	}
}

// armELFHeader is the header of a 64-bit little-endian Linux ELF
// executable for arm64, with no sections: enough for install to see the
// architecture.
func armELFHeader() []byte {
	h := make([]byte, 64)
	copy(h, "\x7fELF")
	h[4], h[5], h[6] = 2, 1, 1 // 64-bit, little-endian, version 1
	h[16] = 2                  // ET_EXEC
	h[18] = 183                // EM_AARCH64
	h[20] = 1                  // version
	h[52] = 64                 // e_ehsize
	return h
}

// What install refuses before it contacts anything.
func TestAgent_installRefusals(t *testing.T) {
	m := manifestWith(t, "512")
	notBinary := filepath.Join(t.TempDir(), "corral")
	os.WriteFile(notBinary, []byte("#!/bin/sh\n"), 0o755)
	conn := []string{"--endpoint", "https://127.0.0.1:1", "--api-token", "u@pve!t=s", "--fingerprint", "00"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no endpoint", []string{"--endpoint", ""}, "needs an endpoint it can hand to the agent, and the emulator inside this command (CORRAL_SIM_INPROCESS=1) stops with it"},
		{"insecure", append(slices.Clone(conn), "--insecure"), "pin the certificate"},
		{"not a binary", append(slices.Clone(conn), "--binary", notBinary), "is not a Linux binary"},
		{"mode", append(slices.Clone(conn), "--mode", "fix"), `--mode "fix": want observe or reconcile`},
		{"pass-env name", append(slices.Clone(conn), "--pass-env", "A-B"), "want a variable name"},
		{"pass-env ours", append(slices.Clone(conn), "--pass-env", "PROXMOX_VE_API_TOKEN"), "install sets that variable itself"},
		{"git path", append(slices.Clone(conn), "--git", "/srv/repo.git", "--git-path", "../corral.yaml"), "want a relative path inside the repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PROXMOX_VE_ENDPOINT", "")
			r := runCorral(t, append([]string{"agent", "install", "-f", m}, tc.args...)...)
			if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", r.code, ExitError, tc.want, r.stderr)
			}
		})
	}
	// A manifest whose project is its directory's name: the agent's copy
	// would be another manifest, refused every change of these apps.
	t.Run("no project", func(t *testing.T) {
		t.Setenv("PROXMOX_VE_ENDPOINT", "")
		dm := writeManifestIn(t, "shop", strings.ReplaceAll(appManifest, "MEMORY", "512"))
		r := runCorral(t, append([]string{"agent", "install", "-f", dm}, conn...)...)
		if want := "add `project: shop` at the top of " + dm; r.code != ExitError || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want %d and %q:\n%s", r.code, ExitError, want, r.stderr)
		}
	})
}

// A manifest that reads ${env:…}: without --pass-env the agent cannot
// load it, and install fails at once with the end of the agent's log;
// with --pass-env the value goes into the agent's 0600 env file (and
// nowhere in the output).
func TestAgent_installPassEnv(t *testing.T) {
	t.Parallel()
	c := newGuestCluster(t)
	const secret = "notes-key-7f3a9c2e51"
	ownEnv(t, "NOTES_KEY", secret)
	m := writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512")+`    provision:
      - envFile:
          path: /etc/notes.env
          env:
            - name: KEY
              value: ${env:NOTES_KEY}
`)
	c.mustRun("apply", "-f", m, "--auto-approve")
	bin := corralBinary(t)
	install := func(extra ...string) result {
		return runCorral(t, append(append([]string{"agent", "install", "-f", m, "--binary", bin, "--interval", "1s"}, extra...), c.rootArgs()...)...)
	}
	r := install()
	needGuestExec(t, r.stderr)
	t.Cleanup(func() { runCorral(t, append([]string{"agent", "uninstall", "-f", m}, c.rootArgs()...)...) })
	if r.code != ExitError || !strings.Contains(r.stderr, "the agent exited") || !strings.Contains(r.stderr, "NOTES_KEY") {
		t.Errorf("install without --pass-env: exit %d\n%s", r.code, r.stderr)
	}
	r2 := install("--pass-env", "NOTES_KEY")
	if r2.code != 0 {
		t.Fatalf("install --pass-env: exit %d\n%s", r2.code, r2.stderr)
	}
	env, _ := c.ctFile(c.agentCTs("demo")[0], "etc/corral/agent/agent.env")
	if q, _ := manifest.EnvFileValue(secret); !strings.Contains(env, "NOTES_KEY="+q+"\n") {
		t.Errorf("the env file lacks NOTES_KEY")
	}
	for _, out := range []string{r.stdout, r.stderr, r2.stdout, r2.stderr} {
		if strings.Contains(out, secret) {
			t.Errorf("the output shows the secret:\n%s", out)
		}
	}
}

// envFileUnquote reads back a value manifest.EnvFileValue wrote: plain,
// in double quotes with \\, \" and \$ escaped, or in single quotes.
func envFileUnquote(v string) string {
	switch {
	case len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"':
		return strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\$`, "$").Replace(v[1 : len(v)-1])
	case len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'':
		return v[1 : len(v)-1]
	}
	return v
}
