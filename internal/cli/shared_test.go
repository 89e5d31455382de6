package cli

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

const sharedManifest = `apps:
  - name: notes
    node: pve1
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    rootfs:
      size: 1G
    volumes:
      - name: data
        storage: nfs
        size: 1G
        mount: /srv/data
`

// TestSharedVolumeGuardedClusterWide: a volume on a shared storage can be
// named by a guest on any node, and PVE does not stop two nodes mounting
// it at once. Before attaching it, corral reads the guests of every node,
// not only its own, and refuses when one on another node references it
// (issue 18).
func TestSharedVolumeGuardedClusterWide(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.Nodes(3), pvetest.SharedStorage(model.SharedNFS))
	srv := c.srv
	m := writeManifest(t, sharedManifest)
	c.mustRun("apply", "-f", m, "--auto-approve")
	vols := c.status(m).Apps[0].Volumes
	if len(vols) != 1 || !strings.HasPrefix(vols[0].VolID, "nfs:") {
		t.Fatalf("volumes %+v, want one on nfs", vols)
	}
	volid := vols[0].VolID
	c.mustRun("destroy", "-f", m, "--auto-approve")

	// Someone on pve2 mounts the retained volume by hand.
	root := model.Auth{UserID: "root@pam"}
	cl := srv.Cluster()
	upid, err := cl.CreateCT(root, "pve2", map[string]string{
		"vmid": "170", "ostemplate": "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", "rootfs": "local-lvm:1", "hostname": "intruder",
	})
	if err == nil {
		_, err = cl.WaitTask(t.Context(), "pve2", upid)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.UpdateCTConfig(root, "pve2", 170, map[string]string{"mp0": volid + ",mp=/stolen"}); err != nil {
		t.Fatal(err)
	}

	r := c.run("apply", "-f", m, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "volume "+volid+" is referenced by CT 170 (intruder) on node pve2 mp0") {
		t.Fatalf("apply with the volume mounted on pve2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Freeing it is refused by the plan, naming the guest on pve2.
	noVolume := writeManifest(t, strings.Split(sharedManifest, "    volumes:")[0])
	r = c.run("volumes", "rm", volid, "-f", noVolume, "--auto-approve")
	if r.code != ExitError || !strings.Contains(r.stdout, "! refused: "+volid+" is referenced by CT 170 (intruder) on node pve2 mp0") {
		t.Errorf("volumes rm of a volume mounted on pve2: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, r := range cl.Resources("vm") {
		if r.VMID == 170 || strings.Contains(r.Tags, "corral-keeper") {
			continue
		}
		for k, v := range c.config(r.VMID) {
			if strings.HasPrefix(k, "mp") && strings.HasPrefix(v, volid+",") {
				t.Errorf("CT %d mounts %s although CT 170 on pve2 does", r.VMID, volid)
			}
		}
	}
}
