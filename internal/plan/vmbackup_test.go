package plan

import (
	"strings"
	"testing"
)

// TestVMBackupConsistency: what the plan promises of a VM app's backups,
// by backup.mode and vm.agent.
func TestVMBackupConsistency(t *testing.T) {
	cases := []struct {
		mode  string
		agent bool
		want  string
	}{
		{"snapshot", true, "app-consistent: the guest agent freezes"},
		{"snapshot", false, "crash-consistent: vm.agent is off"},
		{"suspend", true, "crash-consistent: suspend mode"},
		{"stop", false, "consistent: stop mode"},
	}
	for _, tc := range cases {
		a := &App{BackupMode: tc.mode, VM: &VMSpec{Agent: tc.agent}}
		if got := VMBackupConsistency(a); !strings.HasPrefix(got, tc.want) {
			t.Errorf("mode %s agent %v: %q, want it to start %q", tc.mode, tc.agent, got, tc.want)
		}
	}
	if got := VMBackupConsistency(&App{}); got != "" {
		t.Errorf("a container app: %q, want none", got)
	}
}
