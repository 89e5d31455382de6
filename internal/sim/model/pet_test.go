package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The pet/cattle pattern end to end on the model (behaviour.md
// "Consequences for the pet/cattle design"): a persistent volume is named
// for a protected placeholder CT, so destroying the workload that mounts
// it leaves it alone, while a volume the workload owns is lost with it,
// even when it was only an unusedN entry.

const petNode = "pve"

// petSetup makes the protected placeholder CT 999 holding vm-999-disk-1
// as unused0, with a file in it, and returns the volume.
func petSetup(k *opsKit) string {
	k.t.Helper()
	k.ct(petNode, 999, map[string]string{"protection": "1", "hostname": "vol-holder-999", "memory": "64", "swap": "0"})
	pet := k.vol(petNode, 999, 4*gib)
	if pet != "local-lvm:vm-999-disk-1" {
		k.t.Fatalf("pet volume = %s, want local-lvm:vm-999-disk-1", pet)
	}
	k.edit(999, func(g *Guest) { g.Config["unused0"] = pet })
	return pet
}

// petFile reads name from the volume's data directory.
func petFile(k *opsKit, volid, name string) (string, error) {
	dir, err := k.c.VolumePath(petNode, volid)
	if err != nil {
		return "", err
	}
	body, err := os.ReadFile(filepath.Join(dir, name))
	return string(body), err
}

func TestPet_survivesWorkloadDestroy(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	pet := petSetup(k)

	task := ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "hostname": "hermes", "rootfs": "local-lvm:8",
		"features": "nesting=1", "net0": "name=eth0,bridge=vmbr0,ip=dhcp",
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("create: %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	ctTestPut(k, kitOperator, 105, map[string]string{"mp0": pet + ",mp=/home/hermes"})
	if got, want := k.guest(105).Config["mp0"], pet+",mp=/home/hermes,size=4G"; got != want {
		t.Fatalf("mp0 = %q, want %q", got, want)
	}
	k.writeFile(petNode, pet, "notes.txt", "remember me")

	// The placeholder protects itself and its entry.
	_, err := k.c.DestroyCT(kitOperator, petNode, 999, nil)
	wantError(t, err, 500, "can't remove CT 999 - protection mode enabled\n")
	err = k.c.UpdateCTConfig(kitOperator, petNode, 999, map[string]string{"delete": "unused0"})
	wantError(t, err, 500, "can't remove CT 999 drive 'unused0' - protection mode enabled\n")

	task = k.run(k.c.DestroyCT(kitOperator, petNode, 105, nil))
	if task.ExitStatus != "OK" {
		t.Fatalf("destroy: %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	ctTestHasLine(t, task, "ignore deletion of 'local-lvm:vm-999-disk-1', CT 105 isn't the owner!")
	ctTestHasLine(t, task, `  Logical volume "vm-105-disk-0" successfully removed.`)
	if k.volume(petNode, "local-lvm:vm-105-disk-0") != nil {
		t.Error("the workload's rootfs survived")
	}
	if body, err := petFile(k, pet, "notes.txt"); err != nil || body != "remember me" {
		t.Errorf("pet file = %q, %v; want it kept", body, err)
	}
	if got := k.guest(999).Config["unused0"]; got != pet {
		t.Errorf("placeholder unused0 = %q, want %q", got, pet)
	}

	// The next workload attaches the same volume and finds the data.
	ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "106", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:8", "features": "nesting=1",
		"mp0": pet + ",mp=/home/hermes",
	})
	mounts, err := k.c.GuestMounts(106)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range mounts {
		if m.Path == "/home/hermes" {
			body, err := os.ReadFile(filepath.Join(m.HostDir, "notes.txt"))
			found = err == nil && string(body) == "remember me"
		}
	}
	if !found {
		t.Errorf("CT 106 does not see the pet data at /home/hermes: %+v", mounts)
	}
}

func TestPet_ownedVolumeIsLost(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	task := ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "105", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:8", "features": "nesting=1",
		"mp0": "local-lvm:2,mp=/home/hermes",
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("create: %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	own := "local-lvm:vm-105-disk-1"
	k.writeFile(petNode, own, "notes.txt", "doomed")

	// Detaching keeps the volume as unused0 …
	ctTestPut(k, kitOperator, 105, map[string]string{"delete": "mp0"})
	if got := k.guest(105).Config["unused0"]; got != own {
		t.Fatalf("unused0 = %q, want %q", got, own)
	}
	if body, err := petFile(k, own, "notes.txt"); err != nil || body != "doomed" {
		t.Fatalf("detached volume data = %q, %v", body, err)
	}
	// … but it is still named for CT 105, so the destroy takes it.
	task = k.run(k.c.DestroyCT(kitOperator, petNode, 105, nil))
	if task.ExitStatus != "OK" {
		t.Fatalf("destroy: %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	ctTestHasLine(t, task, `  Logical volume "vm-105-disk-1" successfully removed.`)
	if k.volume(petNode, own) != nil {
		t.Error("the CT's own unused volume survived its destroy")
	}
	if _, err := k.c.VolumePath(petNode, own); err == nil {
		t.Error("the volume still has a data directory")
	}
}

func TestPet_rootOnlyOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params map[string]string
		msg    string
	}{
		{name: "feature flags beyond nesting", params: map[string]string{"features": "nesting=1,keyctl=1"},
			msg: "Permission check failed (changing feature flags (except nesting) is only allowed for root@pam)\n"},
		{name: "bind mount", params: map[string]string{"mp1": "/srv/hermes,mp=/srv/hermes"},
			msg: "Permission check failed (mount point type bind is only allowed for root@pam)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newOpsKit(t)
			k.ct(petNode, 105, nil)
			err := k.c.UpdateCTConfig(kitOperator, petNode, 105, tt.params)
			wantError(t, err, 403, tt.msg)
			// root@pam itself (a ticket, not a token) may.
			ctTestPut(k, kitRoot, 105, tt.params)
			g := k.guest(105)
			for key, v := range tt.params {
				if g.Config[key] != v {
					t.Errorf("%s = %q after root's PUT, want %q", key, g.Config[key], v)
				}
			}
			// A root@pam token is not root@pam.
			rootToken := Auth{UserID: "root@pam", TokenID: "root@pam!" + RootTokenName}
			change := map[string]string{}
			for key := range tt.params {
				change[key] = map[string]string{"features": "nesting=1,fuse=1", "mp1": "/srv/other,mp=/srv/hermes"}[key]
			}
			err = k.c.UpdateCTConfig(rootToken, petNode, 105, change)
			if e, ok := err.(*Error); !ok || e.Kind.Code() != 403 {
				t.Errorf("root token: err = %v, want 403", err)
			}
		})
	}
}
