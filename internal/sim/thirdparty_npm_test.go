package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// Issue 33: the npm proxmox-api package (1.1.1, pinned by
// testdata/thirdparty/npm/package-lock.json) drives the emulator through
// version, nodes, containers and their config, pools, users and roles,
// firewall aliases, IP sets, rules and options, power, clone, template,
// cluster resources and a password login (ticket and CSRF token):
// client.cjs asserts each answer as PVE gives it. The package insists on
// PVE's own forms: a token secret that is a lower-case UUID, and the
// content type "application/json;charset=UTF-8" exactly.
func TestThirdParty_npmProxmoxAPI(t *testing.T) {
	t.Parallel()
	node, modules := npmInstall(t, testdataDir(t, "npm"))
	p := newThirdParty(t)
	cmd := exec.Command(node, testdataDir(t, "npm")+"/client.cjs")
	cmd.Env = []string{"NODE_PATH=" + modules, "NODE_EXTRA_CA_CERTS=" + p.ca,
		"PVE_ROOT_PASSWORD=" + p.srv.Credentials().RootPassword}
	out := p.run(cmd)
	if strings.TrimSpace(p.maskAll(out)) != "ok" {
		t.Fatalf("client.cjs printed %q, want ok", p.maskAll(out))
	}
	var pool struct {
		Members []map[string]any `json:"members"`
	}
	p.ok(p.root(), "GET", "/pools/apps", nil, &pool)
	if len(pool.Members) != 2 {
		t.Errorf("pool apps after the client: %v, want CT 101 and the template 104", pool.Members)
	}
}

// npmInstall installs the package.json and package-lock.json of dir with
// npm ci into ~/.cache/corral/npm (a directory per lock file, never the
// repository), once: it returns node and that node_modules. Without node,
// npm or the registry the test skips, or fails where NPM is required.
func npmInstall(t *testing.T, dir string) (node, modules string) {
	t.Helper()
	node, err1 := exec.LookPath("node")
	npm, err2 := exec.LookPath("npm")
	if err1 != nil || err2 != nil {
		testenv.Lack(t, testenv.NPM, "node or npm is not installed: apt-get install nodejs npm to run the npm proxmox-api client against the emulator")
	}
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	root := filepath.Join(cache, "corral", "npm", "proxmox-api-"+hex.EncodeToString(sum[:6]))
	modules = filepath.Join(root, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "proxmox-api", "package.json")); err == nil {
		return node, modules
	}
	if err := os.MkdirAll(filepath.Dir(root), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(root), ".install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for _, f := range []string{"package.json", "package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		testenv.Lackf(t, testenv.NPM, "npm ci of proxmox-api failed (is the npm registry reachable?): %v\n%s", err, out)
	}
	// Another run may have installed it meanwhile: either copy will do.
	if err := os.Rename(tmp, root); err != nil {
		if _, serr := os.Stat(filepath.Join(modules, "proxmox-api", "package.json")); serr != nil {
			t.Fatalf("install proxmox-api into %s: %v", root, err)
		}
	}
	return node, modules
}
