package cli

import (
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
)

// A command polls tasks at the time scale of the emulator it talks to:
// the one a served emulator's env file exports (CORRAL_SIM_TIME_SCALE),
// or, for the tests' emulators, the one registered for the endpoint; with
// neither, Proxmox's own durations (issue 30: a task is read when it is
// expected to end, which an emulator at 0.01 reaches 100 times sooner).
func TestTaskTimeScale_fromEnvAndEmulator(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "CORRAL_SIM_TIME_SCALE" {
			return "0.25"
		}
		return ""
	}
	cf := connFlags{}.resolved(env)
	if got := cf.pveConfig("https://127.0.0.1:9", nil, nil).TaskTimeScale; got == nil || *got != 0.25 {
		t.Errorf("CORRAL_SIM_TIME_SCALE=0.25: TaskTimeScale %v, want 0.25", got)
	}
	e := pvetest.Start(t, pvetest.TimeScale(0.5))
	if got := cf.pveConfig(e.Server.URL(), nil, nil).TaskTimeScale; got == nil || *got != 0.5 {
		t.Errorf("at the test emulator of scale 0.5: TaskTimeScale %v, want 0.5", got)
	}
	none := connFlags{}.resolved(func(string) string { return "" })
	if got := none.pveConfig("https://127.0.0.1:9", nil, nil).TaskTimeScale; got != nil {
		t.Errorf("no scale known: TaskTimeScale %v, want nil (Proxmox's durations)", *got)
	}
}
