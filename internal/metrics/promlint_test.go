package metrics

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestPromlint: client_golang's own linter (testutil/promlint) and
// prometheus/common's text parser accept what this package writes for
// an agent-like registry (counters, histograms, gauges with escaped
// labels, the process and Go metrics), and client_golang writes the same
// bytes for the metrics they parse. They live in a nested module
// (testdata/promlint, its own go.mod and go.sum), so that corral's
// go.mod does not depend on client_golang; building it costs what this
// package saves, so it runs in the full run only (CI), or where the
// machine must have it (CORRAL_REQUIRE_PROMLINT).
func TestPromlint(t *testing.T) {
	if !testenv.Full() && !testenv.Promlint.Required() {
		t.Skipf("skipped: builds client_golang's linter from the Go module proxy; %s=1 (or %s=1) runs it, as CI does", testenv.FullVar, testenv.Promlint.Env())
	}
	t.Parallel()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goCmd); err != nil {
		t.Fatalf("no go command beside this test's GOROOT: %v", err)
	}
	dir := filepath.Join("testdata", "promlint")
	env := []string{"GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false"}
	dl := exec.Command(goCmd, "mod", "download")
	dl.Dir, dl.Env = dir, append(dl.Environ(), env...)
	if out, err := dl.CombinedOutput(); err != nil {
		testenv.Lackf(t, testenv.Promlint, "go mod download of client_golang failed (is the Go module proxy reachable?): %v\n%s", err, out)
	}
	// Built as this test was (-race under -race), it shares the build
	// cache's standard library with the test's own build.
	bin := filepath.Join(t.TempDir(), "promlint")
	build := exec.Command(goCmd, append(append([]string{"build"}, testenv.GoBuildFlags()...), "-o", bin, ".")...)
	build.Dir, build.Env = dir, append(build.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the promlint checker: %v\n%s", err, out)
	}
	withRuntime := goldenRegistry()
	withRuntime.AddRuntime()
	for name, r := range map[string]*Registry{"golden": goldenRegistry(), "with the runtime metrics": withRuntime} {
		in := text(t, r)
		cmd := exec.Command(bin)
		cmd.Env = []string{"GORACE=" + testenv.RaceOptions()}
		cmd.Stdin = strings.NewReader(in)
		if code, out, errs := testenv.Run(t, cmd); code != 0 || out != "ok\n" {
			t.Errorf("%s registry: the checker exited %d:\n%s%s\nits input:\n%s", name, code, out, errs, in)
		}
	}
}
