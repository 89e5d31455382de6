package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRepo is a bare repository and a work tree that pushes to it: what
// corral agent --git pulls, with no network (a path URL).
type gitRepo struct {
	t          *testing.T
	bare, work string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed for corral agent --git: %v", err)
	}
	dir := t.TempDir()
	r := &gitRepo{t: t, bare: filepath.Join(dir, "notes.git"), work: filepath.Join(dir, "work")}
	r.git(dir, "init", "--quiet", "--bare", "--initial-branch=main", r.bare)
	r.git(dir, "init", "--quiet", "--initial-branch=main", r.work)
	return r
}

func (r *gitRepo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=corral test", "-c", "user.email=test@corral.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes corral.yaml, commits and pushes it; it returns the commit.
func (r *gitRepo) commit(manifest, msg string) string {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.work, "corral.yaml"), []byte(manifest), 0o644); err != nil {
		r.t.Fatal(err)
	}
	r.git(r.work, "add", "corral.yaml")
	r.git(r.work, "commit", "--quiet", "-m", msg)
	r.git(r.work, "push", "--quiet", r.bare, "main")
	return r.git(r.work, "rev-parse", "HEAD")
}

// corral agent --git: the manifest comes from a repository; a new commit
// is pulled when a plan is due and applied, the commit applied is in the
// API, the events and the page; a commit with an invalid manifest is
// reported and the last good commit's manifest stays in force (a drift
// is repaired to it).
func TestAgent_git(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	repo := newGitRepo(t)
	manifestAt := func(memory string) string {
		return "project: gitnotes\n" + strings.ReplaceAll(appManifest, "MEMORY", memory)
	}
	a := repo.commit(manifestAt("512"), "notes at 512 MiB")
	checkout := filepath.Join(t.TempDir(), "checkout")
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	r := c.newAgentRig("unused.yaml", "reconcile", start, func(ar *agentArgs) {
		ar.git = gitFlags{url: repo.bare, ref: "main", path: "corral.yaml", dir: checkout}
	})
	r.tick()
	st := r.ag.Status()
	if st.Git == nil || st.Git.Commit != a || st.Git.Head != a || st.Project != "gitnotes" {
		t.Fatalf("after the first round: git %+v, project %q, want commit %s\n%s", st.Git, st.Project, a, r.stderr)
	}
	vmid := r.app("notes").VMID
	if vmid == 0 || c.config(vmid)["memory"] != "512" {
		t.Fatalf("the app was not created from commit %s: %+v\n%s", a, r.app("notes"), r.stderr)
	}

	// A new commit: pulled when the next plan is due, and applied.
	b := repo.commit(manifestAt("1024"), "notes at 1 GiB")
	seq := r.lastSeq()
	r.tick() // not due yet: nothing pulled
	if got := r.ag.Status().Git.Head; got != a {
		t.Errorf("pulled before the interval was up: head %s", got)
	}
	r.clock.Add(time.Minute)
	r.tick()
	if got := c.config(vmid)["memory"]; got != "1024" {
		t.Errorf("memory = %s after commit %s, want 1024\n%s", got, b, r.stderr)
	}
	if st := r.ag.Status(); st.Git.Commit != b {
		t.Errorf("git commit in force = %s, want %s", st.Git.Commit, b)
	}
	if !hasEvent(r.events("git", seq), "", "at commit "+b[:12]) || !hasEvent(r.events("manifest", seq), "", "git commit "+b[:12]) ||
		len(r.events("reconcile", seq)) == 0 {
		t.Errorf("events after commit %s: %+v", b, r.events("", seq))
	}

	// A commit with an invalid manifest: reported, the last good one kept.
	bad := repo.commit(manifestAt("a lot"), "broken")
	seq = r.lastSeq()
	r.clock.Add(time.Minute)
	r.tick()
	st = r.ag.Status()
	if st.Git.Commit != b || st.Git.Head != bad {
		t.Errorf("after the bad commit: commit %s head %s, want %s and %s", st.Git.Commit, st.Git.Head, b, bad)
	}
	if !hasEvent(r.events("manifest", seq), "", "git commit "+bad[:12]+" is not valid (keeping commit "+b[:12]+")") {
		t.Errorf("no event for the invalid commit: %+v", r.events("", seq))
	}
	c.drift(writeManifest(t, manifestAt("1024")), "2048")
	r.clock.Add(time.Minute)
	r.tick()
	if got := c.config(vmid)["memory"]; got != "1024" {
		t.Errorf("memory = %s: the drift was not repaired to the last good commit's manifest\n%s", got, r.stderr)
	}

	// The page shows the commit in force and the one refused.
	srv := httptest.NewServer(r.ag.Handler(""))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{b[:12], "commit " + bad[:12] + " not applied"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the status page lacks %q", want)
		}
	}

	// A fixed commit is applied again.
	fixed := repo.commit(manifestAt("768"), "fixed")
	r.clock.Add(time.Minute)
	r.tick()
	if st := r.ag.Status(); st.Git.Commit != fixed || st.Git.Head != fixed || c.config(vmid)["memory"] != "768" {
		t.Errorf("after the fix: git %+v, memory %s", st.Git, c.config(vmid)["memory"])
	}
}
