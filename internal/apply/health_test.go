package apply

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// status logs into a container for its health only when it has checks,
// is the app's one running container, and has a host key corral pinned
// (status never pins one: it writes nothing); otherwise health is
// unknown and says why.
func TestHealthTarget(t *testing.T) {
	t.Parallel()
	pinned := map[string]string{"description": plan.WithGuestMarkers("", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGx0ZXN0a2V5", "")}
	running := &plan.CT{VMID: 101, Node: "pve", Status: "running", Config: pinned}
	tests := []struct {
		name   string
		cts    []*plan.CT
		checks int
		why    string // "" when ct is the target
	}{
		{"checked", []*plan.CT{running}, 1, ""},
		{"no checks", []*plan.CT{running}, 0, "no health checks"},
		{"no container", nil, 2, "no container"},
		{"two containers", []*plan.CT{running, running}, 1, "2 containers"},
		{"stopped", []*plan.CT{{VMID: 101, Status: "stopped", Config: pinned}}, 1, "ct 101 is stopped"},
		{"no host key", []*plan.CT{{VMID: 101, Status: "running", Config: map[string]string{}}}, 1, "no SSH host key pinned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct, why := healthTarget(tt.cts, tt.checks)
			if tt.why == "" {
				if ct != running || why != "" {
					t.Errorf("healthTarget = %v, %q; want the running container", ct, why)
				}
				return
			}
			if ct != nil || !strings.Contains(why, tt.why) {
				t.Errorf("healthTarget = %v, %q; want none, %q", ct, why, tt.why)
			}
		})
	}
}

// One attempt is said in the singular (issue 32 item 7: was "unhealthy
// after 1 attempts").
func TestHealthErrorAttempts(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1: "unhealthy after 1 attempt: refused", 3: "unhealthy after 3 attempts: refused"} {
		got := (&HealthError{Check: "http", Attempts: n, Err: errors.New("refused")}).Error()
		if !strings.HasPrefix(got, want+"\n") {
			t.Errorf("%d attempts: %q, want %q", n, got, want)
		}
	}
}
