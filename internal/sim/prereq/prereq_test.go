package prereq

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/guest"
)

// TestRun_agreesWithRuntime: the required checks pass exactly when the
// guest runtime would run CTs as LXC containers (guest.CheckLXC), with
// and without CORRAL_SIM_RUNTIME=view.
func TestRun_agreesWithRuntime(t *testing.T) {
	for _, rt := range []string{"", "view"} {
		t.Run("runtime="+rt, func(t *testing.T) {
			t.Setenv("CORRAL_SIM_RUNTIME", rt)
			r := Run()
			lxcErr := guest.CheckLXC()
			if r.OK != (lxcErr == nil) {
				t.Fatalf("report OK=%v, guest.CheckLXC()=%v\n%+v", r.OK, lxcErr, r.Checks)
			}
			if (r.Containers == "lxc") != (lxcErr == nil) {
				t.Fatalf("containers %q, guest.CheckLXC()=%v", r.Containers, lxcErr)
			}
			for _, c := range r.Checks {
				if !c.OK && c.Fix == "" {
					t.Errorf("check %s failed without a fix: %+v", c.Name, c)
				}
			}
		})
	}
}

func TestSubordinateIDs(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		ok            bool
	}{
		{"pve", "root:100000:65536\n", true},
		{"wider", "alice:100000:65536\nroot:0:4294967295\n", true},
		{"uid0", "0:100000:65536\n", true},
		{"short", "root:100000:1000\n", false},
		{"other user", "alice:100000:65536\n", false},
		{"empty", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "subuid")
			os.WriteFile(p, []byte(tc.content), 0o644)
			c := subordinateIDs("subuid", p)
			if c.OK != tc.ok {
				t.Fatalf("OK=%v, want %v: %+v", c.OK, tc.ok, c)
			}
			if !c.OK && !strings.Contains(c.Fix, "root:100000:65536") {
				t.Fatalf("fix %q", c.Fix)
			}
		})
	}
	if c := subordinateIDs("subgid", filepath.Join(t.TempDir(), "none")); c.OK || !strings.Contains(c.Found, "does not exist") {
		t.Fatalf("missing file: %+v", c)
	}
}

func TestCgroup2(t *testing.T) {
	defer func(old string) { cgroupRoot = old }(cgroupRoot)
	cgroupRoot = t.TempDir()
	if c := cgroup2(); c.OK || !strings.Contains(c.Fix, "systemd.unified_cgroup_hierarchy=1") {
		t.Fatalf("no cgroup2: %+v", c)
	}
	os.MkdirAll(filepath.Join(cgroupRoot, "unified"), 0o755)
	os.WriteFile(filepath.Join(cgroupRoot, "unified", "cgroup.controllers"), nil, 0o644)
	if c := cgroup2(); c.OK || !strings.HasPrefix(c.Found, "hybrid") {
		t.Fatalf("hybrid: %+v", c)
	}
	os.WriteFile(filepath.Join(cgroupRoot, "cgroup.controllers"), nil, 0o644)
	if c := cgroup2(); !c.OK {
		t.Fatalf("unified: %+v", c)
	}
}

func TestUserNamespaces(t *testing.T) {
	defer func(old string) { procSys = old }(procSys)
	procSys = t.TempDir()
	os.MkdirAll(filepath.Join(procSys, "user"), 0o755)
	os.WriteFile(filepath.Join(procSys, "user", "max_user_namespaces"), []byte("0\n"), 0o644)
	if c := userNamespaces(); c.OK || c.Fix != sudo("sysctl -w user.max_user_namespaces=15000") {
		t.Fatalf("max 0: %+v", c)
	}
	os.WriteFile(filepath.Join(procSys, "user", "max_user_namespaces"), []byte("96365\n"), 0o644)
	if c := userNamespaces(); !c.OK || c.Found != "user.max_user_namespaces=96365" {
		t.Fatalf("max 96365: %+v", c)
	}
}
