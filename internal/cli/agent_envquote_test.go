package cli

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/agent"
)

// The agent's env file uses manifest.EnvFileValue's quoting (tested there
// against sh and systemd); a value it refuses is named by its variable,
// never shown, since it is usually a secret.
func TestAgentEnvQuoteRefusesWithoutShowingValue(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"sec\nret", "sec\x00ret", "sec`ret'x"} {
		_, err := agent.EnvQuote("PROXMOX_VE_API_TOKEN", bad)
		if err == nil {
			t.Fatalf("agent.EnvQuote(%q) accepted", bad)
		}
		if !strings.Contains(err.Error(), "PROXMOX_VE_API_TOKEN") || strings.Contains(err.Error(), "sec") {
			t.Errorf("error %q: want the variable's name and not its value", err)
		}
	}
	if q, err := agent.EnvQuote("X", "it's"); err != nil || q != `"it's"` {
		t.Errorf(`agent.EnvQuote("it's") = %q, %v`, q, err)
	}
}
