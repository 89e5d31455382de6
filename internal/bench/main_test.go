package bench

import (
	"os"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestMain runs the emulator's after-save check (every save re-read from
// its files and compared with the state in memory, both encoded whole)
// only with CORRAL_TEST_FULL (CI): these tests count requests and time
// runs of up to 40 apps, where the check is more than half the CPU
// (TestDestroyDeleteVolumesReadsPerApp: 50 s of CPU with it, 23 s
// without); it is an invariant of internal/sim/model, whose own tests
// keep it on.
//
// The emulators' CTs run in the unisolated view (CORRAL_SIM_RUNTIME=view,
// opted in with CORRAL_SIM_UNISOLATED=1) unless the environment chooses,
// as in internal/apply: these tests count requests and time the API,
// where the guest runtime plays no part, and on a machine without LXC
// (a newcomer's, before .ci/run installs it) the emulator would refuse
// every CT start.
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_SIM_RUNTIME") == "" {
		os.Setenv("CORRAL_SIM_RUNTIME", "view")
	}
	if os.Getenv("CORRAL_SIM_UNISOLATED") == "" {
		os.Setenv("CORRAL_SIM_UNISOLATED", "1")
	}
	model.SetJournalCheck(testenv.Full())
	testenv.Exit(m.Run())
}
