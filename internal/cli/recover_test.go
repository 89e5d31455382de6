package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// recoverManifest has an app whose volume is on shared storage (nfs) and
// one whose volume is node-local; %s is each app's node line.
const recoverManifest = `project: rec
apps:
  - name: notes
%s    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    onboot: true
    rootfs:
      size: 1G
    volumes:
      - name: data
        storage: nfs
        size: 1G
        mount: /srv/data
  - name: cache
%s    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 1G
    volumes:
      - name: data
        storage: local-lvm
        size: 1G
        mount: /srv/cache
`

// runningMounts lists the running CTs whose config mounts volid.
func (c *cluster) runningMounts(volid string) []int {
	c.t.Helper()
	var out []int
	for _, r := range c.srv.Cluster().Resources("vm") {
		if strings.Contains(r.Tags, plan.TagKeeper) || c.srv.Cluster().GuestPID(r.VMID) == 0 {
			continue
		}
		for k, v := range c.config(r.VMID) {
			if strings.HasPrefix(k, "mp") && plan.ParseMountPoint(v).Volume == volid {
				out = append(out, r.VMID)
			}
		}
	}
	return out
}

// TestRecoverSharedAppFromOfflineNode (issue 18): on a 3-node emulator
// with NFS, node pve2 loses power. Without --recover the plan leaves its
// apps alone and says which could be recovered; apply --recover builds the
// app whose volume is on shared storage anew on another node (new VMID,
// same volume, its data there) and refuses the one whose volume is on
// local-lvm, with the reason. The volume is never mounted by two running
// containers; when pve2 is back the next apply removes the stale copy
// first (stopping it when pve2's boot started it, onboot), the keeper's
// record and the volume stay, and a plan after that has no changes.
func TestRecoverSharedAppFromOfflineNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		boot    model.NodePower // how pve2 comes back
		destroy bool            // then corral destroy instead of apply
	}{
		{"operator kept guests down", model.NodePower{NoStartAll: true}, false},
		{"pve2 boots its onboot guests", model.NodePower{}, false},
		{"destroy once pve2 is back", model.NodePower{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, pvetest.Nodes(3), pvetest.SharedStorage(model.SharedNFS))
			srv := c.srv
			cl := srv.Cluster()
			pin := "    node: pve2\n"
			m := writeManifest(t, fmt.Sprintf(recoverManifest, pin, pin))
			c.mustRun("apply", "-f", m, "--auto-approve")
			// Existing apps stay where they are without node:.
			if err := os.WriteFile(m, []byte(fmt.Sprintf(recoverManifest, "", "")), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := c.run("plan", "-f", m); r.code != 0 {
				t.Fatalf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			old := c.vmidOf(m, "notes")
			var volid string
			for _, a := range c.status(m).Apps {
				if a.App == "notes" {
					volid = a.Volumes[0].VolID
				}
			}
			if !strings.HasPrefix(volid, "nfs:") {
				t.Fatalf("notes volume %q, want one on nfs", volid)
			}
			dir, err := cl.VolumePath("pve2", volid)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("before the power cut"), 0o644); err != nil {
				t.Fatal(err)
			}

			if _, err := cl.SetNodePower("pve2", false, model.NodePower{PowerOff: true}); err != nil {
				t.Fatal(err)
			}
			// Exit 2: the apps on the offline node are not checked (issue 26).
			r := c.run("plan", "-f", m)
			if r.code != ExitChanges || !strings.Contains(r.stdout, "Not checked: app notes (node pve2), app cache (node pve2)") || !strings.Contains(r.stdout, "app notes: node pve2 is offline") || !strings.Contains(r.stdout, "corral apply --recover can start it on another node") ||
				!strings.Contains(r.stdout, "app cache: node pve2 is offline") || !strings.Contains(r.stdout, "volume data is on storage local-lvm, which is not shared") {
				t.Fatalf("plan with pve2 offline: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			r = c.run("plan", "-f", m, "--recover", "-o", "json")
			var pj struct {
				Changes []struct {
					App         string `json:"app"`
					Node        string `json:"node"`
					Action      string `json:"action"`
					RecoverFrom *struct {
						VMID int    `json:"vmid"`
						Node string `json:"node"`
					} `json:"recover_from"`
					Volumes []struct {
						Action string `json:"action"`
						VolID  string `json:"volid"`
					} `json:"volumes"`
				} `json:"changes"`
				Warnings []string `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil || r.code != ExitChanges {
				t.Fatalf("plan --recover -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
			}
			for _, ch := range pj.Changes {
				switch ch.App {
				case "notes":
					if ch.Action != "create" || ch.RecoverFrom == nil || ch.RecoverFrom.VMID != old || ch.RecoverFrom.Node != "pve2" || ch.Node == "pve2" ||
						len(ch.Volumes) != 1 || ch.Volumes[0].Action != "attach" || ch.Volumes[0].VolID != volid {
						t.Errorf("notes in plan --recover: %+v", ch)
					}
				case "cache":
					if ch.Action != "no-op" || ch.RecoverFrom != nil {
						t.Errorf("cache in plan --recover: %+v", ch)
					}
				}
			}
			if !slices.ContainsFunc(pj.Warnings, func(w string) bool { return strings.HasPrefix(w, "app cache: --recover refused: node pve2 is offline") }) {
				t.Errorf("no refusal for cache: %q", pj.Warnings)
			}

			// cache cannot be recovered: the apply recovers notes, then
			// says cache is not checked and exits 1.
			r = c.run("apply", "-f", m, "--recover", "--auto-approve")
			if r.code != 1 || !strings.Contains(r.stderr, "apply incomplete") || !strings.Contains(r.stderr, "app cache: its container") || strings.Contains(r.stderr, "app notes: its container") {
				t.Errorf("apply --recover with cache unrecoverable: exit %d, want 1 naming cache only\n%s%s", r.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, "recover ct "+strconv.Itoa(old)+" from offline pve2") || !strings.Contains(r.stdout, "node pve2 must stay down") {
				t.Errorf("apply --recover does not say what it does and what the operator must guarantee:\n%s", r.stdout)
			}
			recovered := 0
			for _, ct := range cl.Resources("vm") {
				if strings.Contains(ct.Tags, "corral-app-notes") && ct.VMID != old {
					recovered = ct.VMID
					if ct.Node == "pve2" || cl.GuestPID(ct.VMID) == 0 {
						t.Errorf("recovered CT %d on %s, running %v", ct.VMID, ct.Node, cl.GuestPID(ct.VMID) != 0)
					}
				}
			}
			if got := c.runningMounts(volid); !slices.Equal(got, []int{recovered}) || recovered == 0 {
				t.Fatalf("after recovery %s is mounted by running CTs %v, want only the recovered %d", volid, got, recovered)
			}
			newDir, err := cl.VolumePath("pve1", volid)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(newDir, "marker")); err != nil || string(b) != "before the power cut" {
				t.Errorf("marker after recovery: %q, %v", b, err)
			}
			r = c.run("plan", "-f", m)
			if r.code != ExitChanges || !strings.Contains(r.stdout, "recovered from container "+strconv.Itoa(old)+" on pve2, which is offline") || !strings.Contains(r.stdout, "Not checked: app cache (node pve2)") {
				t.Errorf("plan after the recovery, pve2 still down: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}

			// pve2 comes back.
			started, err := cl.SetNodePower("pve2", true, tc.boot)
			if err != nil {
				t.Fatal(err)
			}
			for _, upid := range started {
				if _, err := cl.WaitTask(t.Context(), "pve2", upid); err != nil {
					t.Fatal(err)
				}
			}
			running := c.runningMounts(volid)
			switch {
			case tc.boot.NoStartAll && len(running) != 1:
				t.Errorf("pve2 back without its guests: %s mounted by running CTs %v", volid, running)
			case !tc.boot.NoStartAll && len(running) != 2:
				// What the operator must prevent: PVE starts the stale copy.
				t.Errorf("pve2 booted its onboot guests: %s mounted by running CTs %v, want both", volid, running)
			}
			r = c.run("plan", "-f", m)
			if r.code != ExitChanges || !strings.Contains(r.stdout, "remove stale copy ct "+strconv.Itoa(old)+" on pve2") {
				t.Errorf("plan with pve2 back: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if tc.destroy {
				c.mustRun("destroy", "-f", m, "--auto-approve")
				if c.exists(old) || c.exists(recovered) {
					t.Errorf("after destroy: stale %d exists %v, recovered %d exists %v", old, c.exists(old), recovered, c.exists(recovered))
				}
				if got := c.runningMounts(volid); len(got) != 0 {
					t.Errorf("after destroy %s is mounted by %v", volid, got)
				}
				if b, err := os.ReadFile(filepath.Join(newDir, "marker")); err != nil || string(b) != "before the power cut" {
					t.Errorf("marker after destroy: %q, %v", b, err)
				}
				return
			}
			c.mustRun("apply", "-f", m, "--auto-approve")
			if c.exists(old) {
				t.Errorf("stale CT %d still exists", old)
			}
			if got := c.runningMounts(volid); !slices.Equal(got, []int{recovered}) {
				t.Errorf("after the stale copy went: %s mounted by running CTs %v, want %d", volid, got, recovered)
			}
			if b, err := os.ReadFile(filepath.Join(newDir, "marker")); err != nil || string(b) != "before the power cut" {
				t.Errorf("marker after the stale copy went: %q, %v", b, err)
			}
			// The keeper on pve2 still owns and records the volume.
			held := false
			for _, k := range c.keepers() {
				for key, v := range c.config(k) {
					mp := plan.ParseMountPoint(v)
					if strings.HasPrefix(key, "mp") && mp.Volume == volid && mp.Path == "/corral/notes/data" && plan.VolumeOwner(volid) == k {
						held = true
					}
				}
			}
			if !held {
				t.Errorf("no keeper records %s any more", volid)
			}
			if r := c.run("plan", "-f", m); r.code != 0 {
				t.Errorf("plan after the stale copy went: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
