package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/testutil/secretscan"
	"github.com/corralhq/corral/internal/ui"
)

// put writes a file of the work tree (a link when link is set) and
// stages it.
func (r *gitRepo) put(name, content, link string) {
	r.t.Helper()
	p := filepath.Join(r.work, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		r.t.Fatal(err)
	}
	os.Remove(p)
	var err error
	if link != "" {
		err = os.Symlink(link, p)
	} else {
		err = os.WriteFile(p, []byte(content), 0o644)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.git(r.work, "add", "--", name)
}

const gitAllowManifest = `project: gitallow
apps:
  - name: notes
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    features: {nesting: true}
    provision:
      - file:
          path: /etc/notes/motd
          source: SOURCE
      - envFile:
          path: /etc/notes/env
          env:
            - {name: KEY, value: "VALUE"}
`

func gitAllowAt(source, value string) string {
	return strings.NewReplacer("SOURCE", source, "VALUE", value).Replace(gitAllowManifest)
}

// TestAgent_gitAllowList (issue 27): a manifest the agent takes from a
// Git repository reads from its host only the files of its checkout and
// the variables the agent names with --pass-env. A commit whose manifest
// names a file outside the checkout (by path, by .., through a committed
// link, or as the manifest itself) or an environment variable not passed
// is refused: the refusal is in the agent's status, API, page and
// events, the last good commit stays in force, and nothing of the host
// reaches the container or any output. A file inside the checkout and a
// passed variable are read.
func TestAgent_gitAllowList(t *testing.T) {
	t.Parallel()
	c := newGuestCluster(t)
	const hostSecret, passed = "host-secret-7c1e9a44", "passed-value-3b8d21"
	outside := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(outside, []byte(hostSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ownEnv(t, "NOTES_PASSED", passed)
	ownEnv(t, "NOTES_NOT_PASSED", hostSecret)
	var secrets secretscan.Set
	secrets.Add(t, "host file", hostSecret)
	secrets.Add(t, "passed variable", passed)

	repo := newGitRepo(t)
	repo.put("files/motd", "hello from git\n", "")
	good := repo.commit(gitAllowAt("files/motd", "${env:NOTES_PASSED}"), "a file of the checkout, a passed variable")
	checkout := filepath.Join(t.TempDir(), "checkout")
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := c.newAgentRig("unused.yaml", "reconcile", start, func(ar *agentArgs) {
		ar.git = gitFlags{url: repo.bare, ref: "main", path: "corral.yaml", dir: checkout}
		ar.passEnv = []string{"NOTES_PASSED"}
	})
	r.tick()
	vmid := r.app("notes").VMID
	if vmid == 0 {
		t.Fatalf("the app was not created from commit %s\n%s", good, r.stderr)
	}
	rootfs, _, _ := strings.Cut(c.config(vmid)["rootfs"], ",")
	needGuestExec(t, r.stderr.String())
	motd := func() string {
		b, err := os.ReadFile(c.file(rootfs, "etc/notes/motd"))
		if err != nil {
			t.Fatalf("motd in CT %d: %v\n%s", vmid, err, r.stderr)
		}
		return string(b)
	}
	if got := motd(); got != "hello from git\n" {
		t.Fatalf("motd = %q, want the checkout's files/motd", got)
	}
	if b, err := os.ReadFile(c.file(rootfs, "etc/notes/env")); err != nil || string(b) != "KEY="+passed+"\n" {
		t.Fatalf("the passed variable is not in the env file: %q %v", b, err)
	}

	rel, err := filepath.Rel(checkout, outside)
	if err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name   string
		commit func() string
		want   []string // in the status's manifest error
	}{
		{"absolute path outside", func() string {
			return repo.commit(gitAllowAt(outside, "${env:NOTES_PASSED}"), "a host file")
		}, []string{outside, "outside the Git checkout"}},
		{"relative path outside", func() string {
			return repo.commit(gitAllowAt(filepath.ToSlash(rel), "${env:NOTES_PASSED}"), "a host file by ..")
		}, []string{rel, "outside the Git checkout"}},
		{"committed link to a host file", func() string {
			repo.put("files/leak", "", outside)
			return repo.commit(gitAllowAt("files/leak", "${env:NOTES_PASSED}"), "a link to a host file")
		}, []string{"files/leak", "outside the Git checkout"}},
		{"committed link read by ${file:}", func() string {
			return repo.commit(gitAllowAt("files/motd", "${file:files/leak}"), "a link to a host file, by reference")
		}, []string{"files/leak", "outside the Git checkout"}},
		{"the Git directory", func() string {
			return repo.commit(gitAllowAt(".git/config", "${env:NOTES_PASSED}"), "the checkout's .git")
		}, []string{".git/config", ".git"}},
		{"variable not passed", func() string {
			return repo.commit(gitAllowAt("files/motd", "${env:NOTES_NOT_PASSED}"), "a variable not passed")
		}, []string{"NOTES_NOT_PASSED", "--pass-env NOTES_NOT_PASSED"}},
		{"HOME not passed, with a default", func() string {
			return repo.commit(gitAllowAt("files/motd", "${env:HOME:-/root}"), "HOME")
		}, []string{"HOME", "--pass-env HOME"}},
		{"the manifest itself a link", func() string {
			repo.put("corral.yaml", "", outside)
			repo.git(repo.work, "commit", "--quiet", "-m", "the manifest a link to a host file")
			repo.git(repo.work, "push", "--quiet", repo.bare, "main")
			return repo.git(repo.work, "rev-parse", "HEAD")
		}, []string{"corral.yaml", "leads outside " + checkout + " through a symbolic link"}},
	}
	for _, tc := range refused {
		seq := r.lastSeq()
		bad := tc.commit()
		r.clock.Add(time.Minute)
		r.tick()
		st := r.ag.Status()
		if st.Git.Commit != good || st.Git.Head != bad {
			t.Errorf("%s: commit in force %s, head %s; want %s kept and %s refused", tc.name, st.Git.Commit, st.Git.Head, good, bad)
		}
		for _, w := range tc.want {
			if !strings.Contains(st.ManifestError, w) {
				t.Errorf("%s: the status's manifest error lacks %q: %q", tc.name, w, st.ManifestError)
			}
		}
		if !hasEvent(r.events("manifest", seq), "", "git commit "+bad[:12]) {
			t.Errorf("%s: no event for the refused commit: %+v", tc.name, r.events("", seq))
		}
		if got := motd(); got != "hello from git\n" {
			t.Errorf("%s: motd = %q: the refused commit changed the container", tc.name, got)
		}
	}

	// The refusal is on the API and the page; nothing of the host is in
	// any output, nor anywhere in the container.
	srv := httptest.NewServer(r.ag.Handler(""))
	defer srv.Close()
	for _, p := range []string{"/api/v1/apps", "/", "/api/v1/events"} {
		resp, err := http.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		secrets.Check(t, p, string(b))
		if p == "/api/v1/apps" {
			var st struct {
				ManifestError string `json:"manifest_error"`
			}
			if err := json.Unmarshal(b, &st); err != nil || !strings.Contains(st.ManifestError, "leads outside") {
				t.Errorf("GET /api/v1/apps: manifest_error %q (%v)", st.ManifestError, err)
			}
		}
		if p == "/" && !strings.Contains(string(b), "leads outside") {
			t.Errorf("the status page does not show the refusal")
		}
	}
	var text bytes.Buffer
	ui.WriteAgentStatus(&text, r.ag.Status(), nil)
	if !strings.Contains(text.String(), "manifest: the last valid one is in force; the one on disk: read the manifest: ") || !strings.Contains(text.String(), "leads outside") {
		t.Errorf("corral agent status does not show the refusal:\n%s", text.String())
	}
	secrets.Check(t, "corral agent status", text.String())
	secrets.Check(t, "agent log", r.stderr.String())
	dir := c.file(rootfs, ".")
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), hostSecret) {
			t.Errorf("the host's secret is in the container, in %s", strings.TrimPrefix(p, dir))
		}
		return nil
	})

	// A good commit again is applied, and the refusal is gone.
	repo.git(repo.work, "rm", "--quiet", "-f", "files/leak", "corral.yaml")
	repo.put("files/motd", "hello again\n", "")
	fixed := repo.commit(gitAllowAt("files/motd", "${env:NOTES_PASSED}"), "good again")
	r.clock.Add(time.Minute)
	r.tick()
	if st := r.ag.Status(); st.Git.Commit != fixed || st.ManifestError != "" {
		t.Errorf("after the fix: git %+v, manifest error %q", st.Git, st.ManifestError)
	}
	if got := motd(); got != "hello again\n" {
		t.Errorf("motd = %q after the fix", got)
	}
}

// corral agent --pass-env: names only, with --git only (a manifest given
// with -f reads any variable but corral's own), never corral's own
// credentials; install --git passes its --pass-env names (not values) on
// to the agent it starts, which reads only those.
func TestAgent_passEnvFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"without --git", []string{"-f", "corral.yaml", "--pass-env", "TOKEN"}, "--pass-env names what a manifest from --git may read"},
		{"not a name", []string{"--git", "/srv/notes.git", "--pass-env", "A-B"}, `--pass-env "A-B": want a variable name`},
		{"corral's own", []string{"--git", "/srv/notes.git", "--pass-env", "PROXMOX_VE_API_TOKEN"}, "--pass-env PROXMOX_VE_API_TOKEN: that is corral's own credential"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCorral(t, append([]string{"agent"}, tc.args...)...)
			if r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, want %d and %q:\n%s", r.code, ExitError, tc.want, r.stderr)
			}
		})
	}

	a := &agentInstallArgs{mode: "reconcile", interval: time.Minute, passEnv: []string{"NOTES_KEY", "NOTES_SALT"},
		git: gitFlags{url: "/srv/notes.git", path: "corral.yaml"}}
	argv := strings.Join(a.command().Argv(agent.ManifestPathOf("demo"), "10.0.0.5:9120", "demo"), " ")
	if !strings.Contains(argv, "--pass-env NOTES_KEY --pass-env NOTES_SALT") {
		t.Errorf("install --git --pass-env: the agent's command line lacks the names: %s", argv)
	}
	a.git = gitFlags{}
	if argv := strings.Join(a.command().Argv(agent.ManifestPathOf("demo"), "10.0.0.5:9120", "demo"), " "); strings.Contains(argv, "--pass-env") {
		t.Errorf("install without --git: the agent's command line has --pass-env: %s", argv)
	}
}

// The status's manifest_error says why the manifest on disk is not in
// force while it is not, and is gone once it is again: a file briefly
// gone and back unchanged, an invalid edit and its fix.
func TestAgent_manifestErrorInStatus(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	text := strings.ReplaceAll(appManifest, "MEMORY", "512")
	m := writeManifestIn(t, "demo", text) // defaulted: edited in place below
	r := c.newAgentRig(m, "observe", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), nil)
	r.tick()
	if got := r.ag.Status().ManifestError; got != "" {
		t.Fatalf("manifest_error %q for a valid manifest", got)
	}
	steps := []struct {
		name, content string // content "" removes the file
		want          string
	}{
		{"gone", "", "read the manifest: "},
		{"back unchanged", text, ""},
		{"invalid", strings.ReplaceAll(appManifest, "MEMORY", "a lot"), "memory"},
		{"fixed", strings.ReplaceAll(appManifest, "MEMORY", "768"), ""},
	}
	for _, s := range steps {
		if s.content == "" {
			os.Remove(m)
		} else if err := os.WriteFile(m, []byte(s.content), 0o644); err != nil {
			t.Fatal(err)
		}
		r.tick()
		got := r.ag.Status().ManifestError
		if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
			t.Errorf("%s: manifest_error %q, want %q", s.name, got, s.want)
		}
	}
}
