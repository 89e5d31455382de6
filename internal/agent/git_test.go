package agent

import (
	"context"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestGit_failures(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed for corral agent --git: %v", err)
	}
	// A directory that is not a checkout is never cleared.
	foreign := t.TempDir()
	keep := filepath.Join(foreign, "notes.txt")
	os.WriteFile(keep, []byte("mine\n"), 0o644)
	g := &Git{URL: filepath.Join(t.TempDir(), "missing.git"), Path: "corral.yaml", Dir: foreign}
	if _, err := g.Pull(context.Background()); err == nil || !strings.Contains(err.Error(), "not empty and not a Git checkout") {
		t.Errorf("pull into a foreign directory: %v", err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the foreign directory's file is gone: %v", err)
	}
	// A password in the URL appears in no error (nothing listens on port 1).
	g = &Git{URL: "http://deploy:hunter2secret@127.0.0.1:1/infra.git", Path: "corral.yaml", Dir: filepath.Join(t.TempDir(), "infra")}
	_, err := g.Pull(context.Background())
	if err == nil || strings.Contains(err.Error(), "hunter2secret") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("pull with a password in the URL: %v", err)
	}
	if v := (&Agent{cfg: Config{Git: g}}).gitView(); strings.Contains(v.URL, "hunter2secret") {
		t.Errorf("the API shows the password: %s", v.URL)
	}
}

// A password in --git's URL is never on git's command line (which ps
// shows every user) nor written into the checkout (a clone keeps its URL
// in .git/config): a real fetch over HTTP through git's http-backend,
// with a git on PATH that records each command line.
func TestGit_passwordNeverWritten(t *testing.T) {
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed for corral agent --git: %v", err)
	}
	work := t.TempDir()
	bare := filepath.Join(work, "infra.git")
	for _, args := range [][]string{
		{"init", "--quiet", "--bare", "--initial-branch=main", bare},
		{"init", "--quiet", "--initial-branch=main", filepath.Join(work, "w")},
		{"-C", filepath.Join(work, "w"), "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "--quiet", "--allow-empty", "-m", "first"},
		{"-C", filepath.Join(work, "w"), "push", "--quiet", bare, "main"},
	} {
		if out, err := exec.Command(realGit, args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	execPath, err := exec.Command(realGit, "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + work, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	bin := t.TempDir()
	argvLog := filepath.Join(work, "argv.log")
	wrapper := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + argvLog + "\nexec " + realGit + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	const secret = "hunter2secret"
	dir := filepath.Join(t.TempDir(), "infra")
	g := &Git{URL: "http://deploy:" + secret + "@" + strings.TrimPrefix(srv.URL, "http://") + "/infra.git", Ref: "main", Path: "corral.yaml", Dir: dir}
	if _, err := g.Pull(context.Background()); err != nil {
		t.Fatalf("pull: %v", err)
	}
	if _, err := g.Pull(context.Background()); err != nil {
		t.Fatalf("second pull: %v", err)
	}
	if argv, _ := os.ReadFile(argvLog); len(argv) == 0 || strings.Contains(string(argv), secret) {
		t.Errorf("git's command lines:\n%s", argv)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); strings.Contains(string(b), secret) {
				t.Errorf("%s holds the password", p)
			}
		}
		return nil
	})
}
