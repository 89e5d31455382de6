package metrics

import (
	"os/exec"
	"path/filepath"
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
	bin := testenv.BuildModule(t, filepath.Join("testdata", "promlint"), testenv.Promlint, "client_golang's linter")
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
