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
func TestMain(m *testing.M) {
	model.SetJournalCheck(testenv.Full())
	os.Exit(m.Run())
}
