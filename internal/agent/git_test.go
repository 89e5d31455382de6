package agent

import (
	"context"
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
