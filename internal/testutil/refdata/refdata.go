// Package refdata locates the reference data that sits beside the
// repository checkout in ../shared (PVE's API schema dumps under pve-api,
// recorded responses under pve-api/fixtures) for tests that compare
// against it, and skips those tests where it is absent, unless the
// environment says the data must be there (testenv.Shared:
// CORRAL_REQUIRE_SHARED): CI sets it, so a missing or moved reference
// file fails the build instead of silently skipping every comparison.
//
// Only tests import it.
package refdata

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
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

// Dir returns ../shared beside the repository root. When that holds no
// pve-api directory (a checkout without the reference data) it skips t,
// or fails it when testenv.Shared is required.
func Dir(t testing.TB) string {
	t.Helper()
	return sharedBeside(t, RepoRoot(t))
}

// sharedBeside is Dir for the repository root root.
func sharedBeside(t testing.TB, root string) string {
	t.Helper()
	dir := filepath.Join(root, "..", "shared")
	if _, err := os.Stat(filepath.Join(dir, "pve-api")); err != nil {
		testenv.Lackf(t, testenv.Shared, "reference data %s is absent (it is a checkout beside the repository): %v", dir, err)
	}
	return dir
}
