package apply_test

import (
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
	"os"
	"testing"
)

// TestMain runs this package's emulators' CTs in the unisolated view
// (CORRAL_SIM_RUNTIME=view, opted in with CORRAL_SIM_UNISOLATED=1) unless the environment chooses: these tests
// are about API calls, volumes and kills at every call boundary, where
// the guest runtime plays no part, and an LXC boot per CT start (about
// 0.1 s, thousands of starts) would double the package's time. The LXC
// runtime is tested in internal/sim/guest and internal/cli.
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_SIM_RUNTIME") == "" {
		os.Setenv("CORRAL_SIM_RUNTIME", "view")
	}
	// The view runs guest commands unisolated on this host: the emulator
	// refuses it unless asked by name.
	if os.Getenv("CORRAL_SIM_UNISOLATED") == "" {
		os.Setenv("CORRAL_SIM_UNISOLATED", "1")
	}
	// A killed run (see killable) fails every request after the kill,
	// and reprotect's backoff would hold it 7.5 s before the test can
	// run it again; the pauses' doubling and count are unchanged.
	apply.SetReprotectDelay(5 * time.Millisecond)
	// The tests wait on emulators far more than they compute: a plain
	// `go test` runs 8 at once as the README's command does.
	testenv.DefaultParallel(8)
	// The emulator's after-save check (every save re-read from its files
	// and compared with the state in memory, both encoded whole: 30% of
	// these tests' CPU) is an
	// invariant of internal/sim/model, whose own tests keep it on; here it runs with CORRAL_TEST_FULL (CI) only.
	model.SetJournalCheck(testenv.Full())
	testenv.Exit(m.Run())
}
