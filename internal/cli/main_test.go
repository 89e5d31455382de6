package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain keeps the tests off the user's own files: corral's SSH key and
// the embedded emulator's state go to a temporary directory.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corral-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("CORRAL_SSH_KEY", filepath.Join(dir, "id_ed25519"))
	os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
