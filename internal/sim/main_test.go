package sim

import (
	"os"
	"testing"
)

// TestMain opts this package's emulators in to the unisolated view where
// LXC cannot run (not root, no lxc package): without the opt-in they
// start no CT there. CI has lxc (CORRAL_REQUIRE_LXC=1), so it is unused.
func TestMain(m *testing.M) {
	if os.Getenv("CORRAL_SIM_UNISOLATED") == "" {
		os.Setenv("CORRAL_SIM_UNISOLATED", "1")
	}
	os.Exit(m.Run())
}
