// Package refdata locates the reference data that sits beside the
// repository checkout in ../shared (PVE's API schema dumps under pve-api,
// recorded responses under pve-api/fixtures) for tests that compare
// against it, and skips those tests where it is absent.
//
// Only tests import it.
package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod, found by walking up from
// the test's working directory (its package directory). It fails t when
// there is none.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = parent
	}
}

// Dir returns ../shared beside the repository root. It skips t when that
// holds no pve-api directory (a checkout without the reference data).
func Dir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "..", "shared")
	if _, err := os.Stat(filepath.Join(dir, "pve-api")); err != nil {
		t.Skipf("reference data %s is absent (it is a checkout beside the repository): %v", dir, err)
	}
	return dir
}
