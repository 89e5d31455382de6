package refdata

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
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

// recordingTB stands in for a test that Dir stops: it records how it was
// stopped and ends its goroutine as testing.T does.
type recordingTB struct {
	testing.TB
	how, msg string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.how, r.msg = "fail", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.how, r.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestDirMissing: without ../shared a test skips, unless CORRAL_REQUIRE_SHARED is
// set, when it fails (what CI does).
func TestDirMissing(t *testing.T) {
	root := filepath.Join(t.TempDir(), "repo") // no ../shared beside it
	for _, tc := range []struct{ env, want string }{{"", "skip"}, {"0", "skip"}, {"1", "fail"}} {
		t.Setenv(testenv.Shared.Env(), tc.env)
		rec := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			sharedBeside(rec, root)
		}()
		<-done
		if rec.how != tc.want || !strings.Contains(rec.msg, "reference data") {
			t.Errorf("%s=%q: Dir ended with %s %q, want %s", testenv.Shared.Env(), tc.env, rec.how, rec.msg, tc.want)
		}
	}
}
