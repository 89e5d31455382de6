package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/testenv"
)

// initGolden runs corral init against c into a new directory and compares
// the manifest with a golden file, the emulator's URL written EMULATOR.
func initGolden(t *testing.T, c *cluster, golden string) string {
	t.Helper()
	m := filepath.Join(t.TempDir(), "web", "corral.yaml")
	if err := os.MkdirAll(filepath.Dir(m), 0o755); err != nil {
		t.Fatal(err)
	}
	r := c.runC("init", "-f", m)
	if r.code != 0 || !strings.Contains(r.stderr, "wrote "+m) {
		t.Fatalf("init: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	b, err := os.ReadFile(m)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, "testdata/init/"+golden, []byte(strings.ReplaceAll(string(b), c.srv.URL(), "EMULATOR")))
	return m
}

// TestInit: init writes a commented manifest from what the emulator
// offers; it validates, plans against the cluster and applies; a second
// init refuses to overwrite it.
func TestInit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := initGolden(t, c, "one-node.yaml")
	if r := c.run("validate", "-f", m); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
	}
	if r := c.run("plan", "-f", m); r.code != ExitChanges || !strings.Contains(r.stdout, "+ app app (create on pve)") {
		t.Fatalf("plan: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	before, _ := os.ReadFile(m)
	r := c.runC("init", "-f", m)
	if want := m + " exists: corral init never overwrites a manifest"; r.code != ExitError || !strings.Contains(r.stderr, want) {
		t.Errorf("init over an existing file: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	if after, _ := os.ReadFile(m); string(after) != string(before) {
		t.Error("init changed the existing file")
	}
}

// TestInit_nodes: on a cluster of three nodes the comments list each
// node's share, and the app is left for placement.
func TestInit_nodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(3))
	m := initGolden(t, c, "three-nodes.yaml")
	if r := c.run("validate", "-f", m); r.code != 0 {
		t.Fatalf("validate: exit %d\n%s", r.code, r.stderr)
	}
}

// TestChoose: the app takes what most nodes have, PVE's defaults and
// Debian first, and a cluster without what an app needs is refused with
// what to do.
func TestChoose(t *testing.T) {
	lvm := found{name: "local-lvm", kind: "lvmthin", content: "rootdir,images", nodes: []string{"a", "b"}}
	zfs := found{name: "tank", kind: "zfspool", content: "images,rootdir", nodes: []string{"a", "b"}}
	isoOnly := found{name: "iso", kind: "dir", content: "images", nodes: []string{"a", "b", "c"}}
	deb := found{name: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", nodes: []string{"a"}}
	alp := found{name: "local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz", nodes: []string{"a"}}
	ubu := found{name: "local:vztmpl/ubuntu-24.04-standard_24.04-2_amd64.tar.zst", nodes: []string{"a", "b"}}
	br := found{name: "vmbr1", nodes: []string{"a", "b"}}
	tests := []struct {
		name                      string
		f                         clusterFacts
		template, storage, bridge string
		err                       string
	}{
		{"defaults first", clusterFacts{online: []string{"a"}, storages: []found{zfs, lvm}, templates: []found{alp, deb}, bridges: []found{br, {name: "vmbr0", nodes: []string{"a", "b"}}}},
			deb.name, "local-lvm", "vmbr0", ""},
		{"most nodes first", clusterFacts{online: []string{"a", "b"}, storages: []found{zfs, isoOnly}, templates: []found{deb, ubu}, bridges: []found{br}},
			ubu.name, "tank", "vmbr1", ""},
		{"no node", clusterFacts{offline: []string{"a"}}, "", "", "", "no node is online (offline: a)"},
		{"no template", clusterFacts{online: []string{"a"}, storages: []found{lvm}, bridges: []found{br}}, "", "", "", "no CT template on any storage with vztmpl content: download one"},
		{"no rootdir", clusterFacts{online: []string{"a"}, storages: []found{isoOnly}, templates: []found{deb}, bridges: []found{br}}, "", "", "", "no storage with rootdir content"},
		{"no bridge", clusterFacts{online: []string{"a"}, storages: []found{lvm}, templates: []found{deb}}, "", "", "", "no network bridge this token can use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := choose(&tt.f)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("choose: %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := [3]string{ch.template.name, ch.storage.name, ch.bridge.name}; got != [3]string{tt.template, tt.storage, tt.bridge} {
				t.Errorf("choose = %q, want %q", got, [3]string{tt.template, tt.storage, tt.bridge})
			}
		})
	}
}

// TestInitManifest_pinsNode: a template only some nodes have pins the
// app to one of them, and names that YAML would misread are quoted.
func TestInitManifest_pinsNode(t *testing.T) {
	f := &clusterFacts{online: []string{"no", "pve2"}}
	ch := chosen{template: found{name: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", nodes: []string{"no"}},
		storage: found{name: "local-lvm", nodes: []string{"no", "pve2"}}, bridge: found{name: "vmbr0", nodes: []string{"no", "pve2"}}}
	text, err := initManifest("https://pve:8006", f, ch)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `node: "no" # the template is only there`) {
		t.Errorf("the app is not pinned to node no:\n%s", text)
	}
}
