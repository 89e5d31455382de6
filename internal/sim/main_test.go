package sim

import (
	"os"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestMain opts this package's emulators in to the unisolated view where
// LXC cannot run (not root, no lxc package): without the opt-in they
// start no CT there. CI has lxc (CORRAL_REQUIRE_LXC=1), so it is unused.
//
// Every test has an emulator of its own and runs in parallel with the
// others, 4 at once unless -parallel says otherwise: the third-party
// clients' tests (ansible, proxmoxer) and those that wait on PVE's task
// durations wait on other processes and clocks more than they compute,
// and run one after another they held a newcomer's `go test -race ./...`
// for 89 s of this package alone (issue 30).
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_SIM_UNISOLATED") == "" {
		os.Setenv("CORRAL_SIM_UNISOLATED", "1")
	}
	// Where LXC can run, every emulator of these tests made a network
	// namespace, a bridge and an ID-map holder (ip, nsenter, sleep and
	// lxc-usernsexec processes) and every CT start booted a container:
	// 15 of this package's 42 CPU-s, measured (issue 30), for tests of the
	// API. A newcomer's run keeps the filesystem view, as internal/cli's
	// does; CI (CORRAL_TEST_FULL, CORRAL_REQUIRE_LXC) runs LXC, and
	// internal/sim/guest tests the runtime itself in every run.
	if os.Getenv("CORRAL_SIM_RUNTIME") == "" && !testenv.Full() && !testenv.LXC.Required() {
		os.Setenv("CORRAL_SIM_RUNTIME", "view")
	}
	testenv.DefaultParallel(4)
	// The after-save journal check (every save re-read from its files and
	// compared with the state in memory, both encoded whole) was a quarter
	// of this package's own CPU in a profile (issue 30): it is an
	// invariant of internal/sim/model, whose own tests keep it on; here it
	// runs with CORRAL_TEST_FULL (CI) only, as in internal/cli and
	// internal/apply.
	model.SetJournalCheck(testenv.Full())
	testenv.Exit(m.Run())
}
