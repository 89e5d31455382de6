package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWorkDir: a kept directory is made and stays; without one, a
// temporary directory is made and cleanup removes it.
func TestWorkDir(t *testing.T) {
	keep := filepath.Join(t.TempDir(), "a", "b")
	dir, cleanup, err := WorkDir(keep)
	if err != nil || dir != keep {
		t.Fatalf("WorkDir(%q) = %q, %v", keep, dir, err)
	}
	cleanup()
	if fi, err := os.Stat(keep); err != nil || !fi.IsDir() {
		t.Errorf("the kept directory: %v", err)
	}
	dir, cleanup, err = WorkDir("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the temporary directory: %v", err)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cleanup left %s: %v", dir, err)
	}
}
