package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRepoRoot(t *testing.T) {
	root := RepoRoot(t)
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Dir(filepath.Dir(filepath.Dir(wd))); root != want {
		t.Errorf("RepoRoot = %s, want %s (three levels above %s)", root, want, wd)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("RepoRoot = %s, which holds no go.mod: %v", root, err)
	}
}

func TestDir(t *testing.T) {
	dir := Dir(t) // skips without the reference data
	if filepath.Dir(dir) != filepath.Dir(RepoRoot(t)) || filepath.Base(dir) != "shared" {
		t.Errorf("Dir = %s, want shared beside %s", dir, RepoRoot(t))
	}
	if _, err := os.Stat(filepath.Join(dir, "pve-api")); err != nil {
		t.Errorf("Dir returned %s without pve-api: %v", dir, err)
	}
}
