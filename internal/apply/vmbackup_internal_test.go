package apply

import (
	"strings"
	"testing"
)

// TestVMBackupConsistency reads a VM backup's consistency from the lines
// vzdump (qemu-server's VZDump/QemuServer.pm) logs, as the emulator and
// PVE write them.
func TestVMBackupConsistency(t *testing.T) {
	cases := []struct {
		name      string
		mode      string
		log       []string
		wantMode  string
		want, why string
	}{
		{"frozen", "snapshot", []string{"INFO: backup mode: snapshot", "INFO: issuing guest-agent 'fs-freeze' command", "INFO: issuing guest-agent 'fs-thaw' command"},
			"snapshot", ConsistentApp, "froze"},
		{"freeze failed", "snapshot", []string{"INFO: backup mode: snapshot", "INFO: issuing guest-agent 'fs-freeze' command", "ERROR: unable to freeze guest fs - timeout", "INFO: issuing guest-agent 'fs-thaw' command"},
			"snapshot", ConsistentCrash, "could not freeze"},
		{"agent off", "snapshot", []string{"INFO: backup mode: snapshot", "INFO: skipping guest filesystem freeze - disabled in VM options"},
			"snapshot", ConsistentCrash, "vm.agent: false"},
		{"agent silent", "snapshot", []string{"INFO: backup mode: snapshot", "INFO: skipping guest filesystem freeze - agent configured but not running?"},
			"snapshot", ConsistentCrash, "did not answer"},
		{"already frozen", "snapshot", []string{"INFO: backup mode: snapshot", "INFO: skipping guest filesystem freeze - already frozen"},
			"snapshot", ConsistentCrash, "already frozen"},
		{"stopped VM", "snapshot", []string{"INFO: status = stopped", "INFO: backup mode: stop"}, "stop", ConsistentStopped, "shut down"},
		{"suspend, no agent line", "suspend", []string{"INFO: backup mode: suspend"}, "suspend", ConsistentCrash, "did not freeze"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mode, got, why := VMBackupConsistency(tc.log, tc.mode)
			if mode != tc.wantMode || got != tc.want || !strings.Contains(why, tc.why) {
				t.Errorf("= %s, %s, %q; want %s, %s, containing %q", mode, got, why, tc.wantMode, tc.want, tc.why)
			}
		})
	}
}
