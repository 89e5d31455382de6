package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// Issue 27, item 2: a manifest cannot write corral's own credentials into
// a container, by reference or by copying a file that holds them
// (/proc/self/environ holds corral's whole environment, token included).
func TestParse_corralSecretsAreNoInputs(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "env")
	if err := os.Symlink("/proc/self/environ", link); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	key := filepath.Join(home, ".config", "corral", "id_ed25519")
	os.MkdirAll(filepath.Dir(key), 0o700)
	if err := os.WriteFile(key, []byte("PRIVATE"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("PROXMOX_VE_API_TOKEN", "corral@pve!corral=SECRET-VALUE")
	app := "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n"
	for _, tc := range []struct{ name, yaml, want string }{
		{"env file value", app + "    provision:\n      - envFile:\n          path: /etc/web.env\n          env:\n            - {name: T, value: \"${env:PROXMOX_VE_API_TOKEN}\"}\n", "PROXMOX_VE_API_TOKEN is corral's own credential"},
		{"with a default", app + "    password: ${env:CORRAL_AGENT_TOKEN:-x}\n", "CORRAL_AGENT_TOKEN is corral's own credential"},
		{"file source in /proc", app + "    provision:\n      - file:\n          path: /root/e\n          source: /proc/self/environ\n", "is under /proc"},
		{"a link to it", app + "    provision:\n      - file:\n          path: /root/e\n          source: " + link + "\n", "is under /proc"},
		{"file reference to corral's key", app + "    password: ${file:~/.config/corral/id_ed25519}\n", "corral's own credential data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse(filepath.Join(dir, "corral.yaml"), []byte(tc.yaml), manifest.LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET-VALUE") || strings.Contains(err.Error(), "PRIVATE") {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}
