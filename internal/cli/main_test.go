package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestMain keeps the tests off the user's own files: corral's SSH key and
// the embedded emulator's state go to a temporary directory.
func TestMain(m *testing.M) {
	if testenv.RunningAs("corral") { // corralBinary
		// The emulator's after-save journal check is a test of
		// internal/sim/model's; the program runs without it.
		model.SetJournalCheck(false)
		os.Exit(Main())
	}
	dir, err := os.MkdirTemp("", "corral-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("CORRAL_SSH_KEY", filepath.Join(dir, "id_ed25519"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	// A developer's own connection settings and log level never reach
	// the tests' commands: each test says its endpoint with flags, so
	// tests that would otherwise clear these with t.Setenv (serial)
	// run in parallel.
	for _, k := range []string{"PROXMOX_VE_ENDPOINT", "PROXMOX_VE_API_TOKEN", "PROXMOX_VE_FINGERPRINT", "PROXMOX_VE_CA_FILE", "PROXMOX_VE_INSECURE", "CORRAL_INSECURE_PLAIN_HTTP", "CORRAL_LOG", "CORRAL_SIM_TIME_SCALE"} {
		os.Unsetenv(k)
	}
	// Where LXC cannot run (not root, no lxc package) the emulator starts
	// no CT unless opted in to the unisolated view: these tests opt in by
	// name (CI has lxc and CORRAL_REQUIRE_LXC=1, so there it is unused).
	// Tests of the refusal itself clear it with t.Setenv.
	if os.Getenv("CORRAL_SIM_UNISOLATED") == "" {
		os.Setenv("CORRAL_SIM_UNISOLATED", "1")
	}
	// Where LXC can run (root, Debian's lxc), every CT start of every
	// test boots a real container and every emulator makes a network
	// namespace: a quarter of this package's CPU, measured (issue 30).
	// A newcomer's run keeps the unisolated view, as on a machine without
	// LXC (the tests that need LXC skip and say so); CI
	// (CORRAL_TEST_FULL, CORRAL_REQUIRE_LXC) boots real containers.
	runtimeOfMachine = os.Getenv("CORRAL_SIM_RUNTIME")
	if runtimeOfMachine == "" && !testenv.Full() && !testenv.LXC.Required() {
		os.Setenv("CORRAL_SIM_RUNTIME", "view")
	}
	// With no endpoint, a corral command here runs the emulator in its
	// own process (CORRAL_SIM_INPROCESS=1) rather than starting the
	// local one in the background, which would outlive the test; the
	// tests of the local emulator clear it and stop theirs.
	if os.Getenv("CORRAL_SIM_INPROCESS") == "" {
		os.Setenv("CORRAL_SIM_INPROCESS", "1")
	}
	// A completion gives up after 3 s, as a shell should; on a loaded
	// machine these tests' emulators answer slower than that, and a
	// completion's candidates, not its patience, are what they test
	// (TestCompletionTimeout tests that).
	if os.Getenv("CORRAL_COMPLETION_TIMEOUT") == "" {
		os.Setenv("CORRAL_COMPLETION_TIMEOUT", "5m")
	}
	// corral sim serve uses the real Debian 12 template by default where
	// the machine can build it (minutes, the first time): these tests
	// keep the stand-in unless they ask (CORRAL_SIM_REAL_TEMPLATES=1).
	if os.Getenv("CORRAL_SIM_REAL_TEMPLATES") == "" {
		os.Setenv("CORRAL_SIM_REAL_TEMPLATES", "0")
	}
	// Each guest cluster says its guests' SSH port under its endpoint
	// (guestport_test.go), so those tests need no process-wide variable.
	guestSSHPortOf = guestPortOf
	// And its time scale, so that commands poll its tasks at that scale.
	taskTimeScaleOf = pvetest.TimeScaleAt
	// The tests wait on emulators and containers far more than they
	// compute: a plain `go test` runs 8 at once as the README's command
	// does.
	testenv.DefaultParallel(8)
	// The emulator's after-save check (every save re-read from its files
	// and compared with the state in memory, both encoded whole: 11%
	// of these tests' CPU in a profile) is an invariant of internal/sim/model, whose
	// own tests keep it on; here it runs with
	// CORRAL_TEST_FULL (CI) only.
	model.SetJournalCheck(testenv.Full())
	code := m.Run()
	os.RemoveAll(dir)
	testenv.Exit(code)
}

// runtimeOfMachine is CORRAL_SIM_RUNTIME as the test run was given it,
// before TestMain's default.
var runtimeOfMachine string

// machineRuntime gives a serial test's emulators the runtime this
// machine has (LXC where it can run) rather than TestMain's view: for
// what only real containers show, such as an agent's own process.
func machineRuntime(t *testing.T) {
	t.Setenv("CORRAL_SIM_RUNTIME", runtimeOfMachine)
}

// realContainers is machineRuntime for a test that needs what only a
// real container shows (what): where LXC cannot run (no lxc package, not
// root) it skips, or fails under CORRAL_REQUIRE_LXC, rather than run in
// the unisolated view TestMain opts in to and fail there.
func realContainers(t *testing.T, what string) {
	t.Helper()
	machineRuntime(t)
	if err := guest.CheckLXC(); err != nil {
		testenv.Lackf(t, testenv.LXC, "%s needs a real container, and LXC cannot run here: %v", what, err)
	}
}
