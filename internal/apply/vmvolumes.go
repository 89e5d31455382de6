package apply

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// A VM app's retained disks move between its VM and the node's keeper VM
// by reassign (move_disk with target-vmid): one qemu-server task that
// renames the volume and moves the drive between the two configs under
// both config locks. Whatever request a killed run sent last, the disk
// is in exactly one of the two configs, with its serial; each step here
// reads both configs first, does nothing when the disk is already where
// it goes, and sends both digests, so the next run finishes the job.

// maxReassignAttempts bounds the reassigns tried again because a config
// changed between the read and the move.
const maxReassignAttempts = 5

// vmNeedsKeeper reports whether c's volumes need the keeper VM: a disk
// to create, attach, detach or free there.
func vmNeedsKeeper(c plan.Change) bool {
	for _, v := range c.Volumes {
		switch v.Action {
		case plan.VolCreate, plan.VolAttach, plan.VolDetach, plan.VolFree:
			return true
		}
	}
	return false
}

// attachVolumes gives the stopped VM vmid the volumes c plans for it:
// new ones allocated on the keeper VM first, then each attached from
// there, and grown when the manifest asks more; a disk the manifest
// dropped goes back to the keeper VM.
func (v vmOps) attachVolumes(ctx context.Context, c plan.Change, vmid int) error {
	if len(c.Volumes) == 0 {
		return nil
	}
	// Found (and protected again if a killed free left it off) even when
	// no disk moves; created only when one must.
	keeper, err := v.keeperVM(ctx, c.App, c.Node, vmNeedsKeeper(c))
	if err != nil {
		return err
	}
	for _, vol := range c.Volumes {
		serial := vol.Serial
		var err error
		switch vol.Action {
		case plan.VolCreate:
			if err = v.allocate(ctx, c.Desired, c.App, c.Node, keeper, vol.Volume); err == nil {
				err = v.reassign(ctx, c.App, c.Node, serial, keeper, vmid, vol.Name)
			}
		case plan.VolAttach:
			err = v.reassign(ctx, c.App, c.Node, serial, keeper, vmid, vol.Name)
		case plan.VolDetach:
			err = v.reassign(ctx, c.App, c.Node, serial, vmid, keeper, vol.Name)
		}
		if err == nil && vol.Action != plan.VolDetach {
			err = v.growVolume(ctx, c.App, c.Node, vmid, serial, vol.Volume)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func hasVolume(c plan.Change, a plan.VolumeAction) bool {
	for _, v := range c.Volumes {
		if v.Action == a {
			return true
		}
	}
	return false
}

// reassign moves the disk of serial from VM from to VM to (one of them
// the keeper VM), at the lowest free scsi key there (scsi1 on, scsi0
// being an app VM's system disk). A disk already on to is done.
func (v vmOps) reassign(ctx context.Context, app, node, serial string, from, to int, name string) error {
	return v.r.step(app, "volume", fmt.Sprintf("%s: vm %d → vm %d", name, from, to), func() error {
		for attempt := 1; ; attempt++ {
			src, err := v.r.client.VMConfigOf(ctx, node, from, true)
			if err != nil {
				return err
			}
			dst, err := v.r.client.VMConfigOf(ctx, node, to, true)
			if err != nil {
				return err
			}
			if _, done := plan.VMVolumeDisks(dst.Values)[serial]; done {
				return nil
			}
			d, ok := plan.VMVolumeDisks(src.Values)[serial]
			if !ok {
				return fmt.Errorf("volume %s of app %s (serial %s) is on neither VM %d nor VM %d on %s: run corral plan to see where it is", name, app, serial, from, to, node)
			}
			key := plan.VMFreeDriveKey(dst.Values, 1)
			if key == "" {
				return fmt.Errorf("VM %d on %s has no free scsi key (scsi1 to scsi30) for volume %s", to, node, name)
			}
			upid, err := v.r.client.ReassignVMDisk(ctx, node, from, &pve.VMDiskReassign{Disk: d.Key, TargetVMID: to, TargetDisk: key, Digest: src.Digest, TargetDigest: dst.Digest})
			if err == nil {
				err = v.r.wait(ctx, app, upid)
			}
			if pve.IsModified(err) && attempt < maxReassignAttempts {
				continue
			}
			return err
		}
	})
}

// growVolume resizes the VM's disk of serial to vol's size when smaller
// (PVE grows a disk of a running VM as well).
func (v vmOps) growVolume(ctx context.Context, app, node string, vmid int, serial string, vol plan.Volume) error {
	conf, err := v.r.client.VMConfigOf(ctx, node, vmid, true)
	if err != nil {
		return err
	}
	d, ok := plan.VMVolumeDisks(conf.Values)[serial]
	if !ok || d.Size >= vol.Size {
		return nil
	}
	return v.r.step(app, "resize", vol.Name+" ("+d.Key+") to "+plan.GiB(vol.Size)+"G", func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.ResizeVM(ctx, node, vmid, d.Key, plan.GiB(vol.Size)+"G")
			return err
		})
		if err != nil {
			return err
		}
		return v.r.wait(ctx, app, upid)
	})
}

// detachAll gives every retained disk of the stopped VM vmid back to the
// keeper VM before the VM is destroyed, except those the plan frees (the
// destroy frees them with the VM). It reads the VM's config live: a disk
// it finds is never destroyed with the VM unless the plan said so.
func (v vmOps) detachAll(ctx context.Context, c plan.Change, vmid int) error {
	conf, err := v.r.client.VMConfigOf(ctx, c.Node, vmid, true)
	if err != nil {
		return err
	}
	disks := plan.VMVolumeDisks(conf.Values)
	if len(disks) == 0 {
		return nil
	}
	freed := map[string]bool{}
	for _, vol := range c.Volumes {
		if vol.Action == plan.VolFree {
			freed[vol.Serial] = true
		}
	}
	keeper, err := v.keeperVM(ctx, c.App, c.Node, true)
	if err != nil {
		return err
	}
	for serial, d := range disks {
		if freed[serial] {
			continue
		}
		if err := v.reassign(ctx, c.App, c.Node, serial, vmid, keeper, d.Key+" ("+serial+")"); err != nil {
			return err
		}
	}
	return nil
}

// freeVolumes frees on the keeper VM the disks c frees (destroy
// --delete-volumes, reclaim: delete) once the app's VM is gone, as
// volumes rm does (freeVMDisks): refused for a disk another guest or a
// snapshot names, the keeper VM's digest sent. A disk the VM's destroy
// freed leaves only its Notes line, which goes.
func (v vmOps) freeVolumes(ctx context.Context, c plan.Change) error {
	if !hasVolume(c, plan.VolFree) {
		return nil
	}
	keeper, err := v.keeperVM(ctx, c.App, c.Node, false)
	if err != nil || keeper == 0 {
		return err // no keeper VM: nothing left to free
	}
	var vols []plan.VolumeFree
	for _, vol := range c.Volumes {
		if vol.Action == plan.VolFree {
			vols = append(vols, plan.VolumeFree{Node: c.Node, Kind: plan.KindVM, Keeper: keeper, App: c.App, Name: vol.Name, VolID: vol.VolID, Serial: vol.Serial})
		}
	}
	_, err = v.freeVMDisks(ctx, vols)
	return err
}
