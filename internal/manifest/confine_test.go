package manifest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// Issue 27: a manifest loaded with Confine (corral agent --git) reads
// only files inside Confine.Root (.git excepted, links followed only
// inside) and only the variables Confine.Env names; the same manifest
// loaded without Confine (corral apply -f) reads them all, as before.
func TestLoad_confine(t *testing.T) {
	root := filepath.Join(t.TempDir(), "checkout")
	os.MkdirAll(filepath.Join(root, "files"), 0o755)
	os.MkdirAll(filepath.Join(root, ".git"), 0o755)
	host := filepath.Join(filepath.Dir(root), "host-file")
	os.WriteFile(host, []byte("HOST-CONTENT"), 0o600)
	os.WriteFile(filepath.Join(root, "files", "motd"), []byte("hello"), 0o644)
	os.WriteFile(filepath.Join(root, ".git", "FETCH_HEAD"), []byte("GIT-CONTENT"), 0o644)
	os.Symlink(host, filepath.Join(root, "files", "leak"))
	os.Symlink("motd", filepath.Join(root, "files", "inner"))
	t.Setenv("PASSED", "passed-value")
	t.Setenv("NOT_PASSED", "NOT-PASSED-VALUE")
	app := "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n"
	source := func(p string) string {
		return app + "    provision:\n      - file:\n          path: /etc/motd\n          source: " + p + "\n"
	}
	confine := manifest.LoadOptions{Confine: &manifest.Confine{Root: root, Env: []string{"PASSED"}}}
	for _, tc := range []struct{ name, yaml, want string }{
		{"file inside", source("files/motd"), ""},
		{"link inside", source("files/inner"), ""},
		{"passed variable", app + "    password: ${env:PASSED}\n", ""},
		{"absolute path outside", source(host), "is outside the Git checkout"},
		{"relative path outside", source("../host-file"), "is outside the Git checkout"},
		{"home", app + "    password: ${file:~/x}\n", "is outside the Git checkout"},
		{"link out", source("files/leak"), "leads outside the Git checkout (" + root + ") through a symbolic link"},
		{"link out by reference", app + "    password: ${file:files/leak}\n", "through a symbolic link"},
		{".git", source(".git/FETCH_HEAD"), "is in the checkout's .git directory"},
		{"compose source outside", app + "    provision:\n      - compose: {source: " + host + "}\n", "is outside the Git checkout"},
		{"compose source inside", app + "    provision:\n      - compose: {source: files/motd}\n", ""},
		{"variable not passed", app + "    password: ${env:NOT_PASSED}\n", "${env:NOT_PASSED}: a manifest from Git reads only the environment variables the agent passes it with --pass-env (now: PASSED); to pass NOT_PASSED, run the agent with --pass-env NOT_PASSED"},
		{"with a default", app + "    password: ${env:HOME:-x}\n", "--pass-env HOME"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse(filepath.Join(root, "corral.yaml"), []byte(tc.yaml), confine)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			for _, s := range []string{"HOST-CONTENT", "GIT-CONTENT", "NOT-PASSED-VALUE"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error shows what it refused to read: %v", err)
				}
			}
			// Lazy loads (destroy, status) refuse as well: the reference
			// itself is refused, not its value.
			lazy := confine
			lazy.Lazy = true
			if _, err := manifest.Parse(filepath.Join(root, "corral.yaml"), []byte(tc.yaml), lazy); err == nil && strings.Contains(tc.yaml, "${env:") {
				t.Errorf("a lazy load accepted it")
			}
			// A human's manifest (no Confine) reads it.
			if _, err := manifest.Parse(filepath.Join(root, "corral.yaml"), []byte(tc.yaml), manifest.LoadOptions{}); err != nil && tc.name != "home" {
				t.Errorf("without Confine: %v", err)
			}
		})
	}

	// The manifest itself: read only inside the checkout.
	os.Symlink(host, filepath.Join(root, "corral.yaml"))
	_, err := manifest.Load(filepath.Join(root, "corral.yaml"), confine)
	if err == nil || !strings.Contains(err.Error(), "leads outside the Git checkout") || strings.Contains(err.Error(), "HOST-CONTENT") {
		t.Errorf("Load of a manifest that is a link out: %v", err)
	}
}
