package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// vmRestoreOps restores a VM archive into an app: vmOps's steps, and the
// restore's own (the archive's restore, the switch below, an interrupted
// one's recovery), kept apart so that vmOps stays a size to read.
type vmRestoreOps struct{ vmOps }

// switchRestored makes the restored VM newID app's (vmrestore.go). Each
// step reads what it changes first and does nothing when it is done, so
// a run killed at any request is finished by the next one (Recover):
//
//  1. the VM it replaces (oldID, 0: none) stops, gives its retained disks
//     to the keeper VM and is set aside (tagged corral-replaced-<app>);
//  2. the keeper VM's disks that carry a serial a restored disk takes are
//     given the serial of <name>-replaced-<stamp>, and its Notes record
//     them and the restored disks, in one config write;
//  3. the restored disks take the app's serials, in one config write;
//  4. newID takes the app's tags and its Notes lose the restore's lines.
//
// Step 2 comes before 3, so that no two disks on a keeper or app VM ever
// carry one serial; until step 4 newID is a restore in flight, whose
// disks no plan counts.
func (v vmRestoreOps) switchRestored(ctx context.Context, app, node string, newID, oldID int, stamp string) error {
	if oldID != 0 {
		if err := v.setAside(ctx, app, node, oldID); err != nil {
			return err
		}
	}
	conf, err := v.r.client.VMConfigOf(ctx, node, newID, true)
	if err != nil {
		return err
	}
	records := plan.ParseVMKeeperNotes(conf.Values["description"])
	finals := map[string]plan.VolumeKey{} // the app's serial → its volume
	serials := map[string]string{}        // drive key of newID → the serial it takes
	for serial, d := range plan.VMVolumeDisks(conf.Values) {
		vk, ok := records[serial]
		if !ok {
			continue // renamed already, or not a disk of the archive's app
		}
		final := plan.VMVolumeSerial(app, vk.Name)
		finals[final] = plan.VolumeKey{App: app, Name: vk.Name}
		if final != serial {
			serials[d.Key] = final
		}
	}
	if len(finals) > 0 {
		if err := v.displace(ctx, app, node, finals, stamp); err != nil {
			return err
		}
	}
	if len(serials) > 0 {
		if err := v.reserial(ctx, app, node, newID, serials); err != nil {
			return err
		}
	}
	return v.takeIdentity(ctx, app, node, newID)
}

// setAside stops the replaced VM, gives its retained disks to the keeper
// VM and tags it corral-replaced-<app>.
func (v vmRestoreOps) setAside(ctx context.Context, app, node string, oldID int) error {
	if err := v.stop(ctx, app, node, oldID); err != nil {
		return err
	}
	if err := v.detachAll(ctx, plan.Change{App: app, Kind: plan.KindVM, Node: node}, oldID); err != nil {
		return err
	}
	conf, err := v.r.client.VMConfigOf(ctx, node, oldID, true)
	if err != nil {
		return err
	}
	if slices.Contains(plan.ParseTags(conf.Values["tags"]), plan.TagReplacedPrefix+app) {
		return nil
	}
	return v.r.step(app, "config", "set the old vm "+strconv.Itoa(oldID)+" aside", func() error {
		return v.r.client.UpdateVMConfig(ctx, node, oldID, &pve.VMConfigUpdate{Digest: conf.Digest,
			Set: map[string]string{"tags": plan.TagManaged + ";" + plan.TagReplacedPrefix + app}})
	})
}

// displace gives each keeper VM disk whose serial is in finals the
// serial of <name>-replaced-<stamp>, and records in the keeper VM's Notes
// those and the restored disks' names, in one write with the config's
// digest. Without a keeper VM nothing is displaced.
func (v vmRestoreOps) displace(ctx context.Context, app, node string, finals map[string]plan.VolumeKey, stamp string) error {
	keeper, err := v.keeperVM(ctx, app, node, false)
	if err != nil || keeper == 0 {
		return err
	}
	return v.r.step(app, "keeper", "keep the disks the restored ones displace as "+app+"/*-replaced-"+stamp, func() error {
		for attempt := 1; ; attempt++ {
			conf, err := v.r.client.VMConfigOf(ctx, node, keeper, true)
			if err != nil {
				return err
			}
			notes := plan.ParseVMKeeperNotes(conf.Values["description"])
			set := map[string]string{}
			disks := plan.VMVolumeDisks(conf.Values)
			for _, final := range slices.Sorted(maps.Keys(finals)) {
				vk := finals[final]
				if d, ok := disks[final]; ok {
					aside := plan.VolumeKey{App: app, Name: vk.Name + "-replaced-" + stamp}
					serial := plan.VMVolumeSerial(app, aside.Name)
					if other, taken := disks[serial]; taken {
						return fmt.Errorf("keeper VM %d on %s: disk %s already carries serial %s (%s), which the displaced disk %s would take; nothing was changed: rename that volume's record, then run corral apply", keeper, node, other.Key, serial, aside, d.Volume)
					}
					set[d.Key] = withSerial(conf.Values[d.Key], serial)
					notes[serial] = aside
				}
				notes[final] = vk
			}
			desc := plan.VMKeeperDescription(notes)
			if len(set) == 0 && desc == conf.Values["description"] {
				return nil
			}
			set["description"] = desc
			err = v.r.client.UpdateVMConfig(ctx, node, keeper, &pve.VMConfigUpdate{Digest: conf.Digest, Set: set})
			if pve.IsModified(err) && attempt < maxCASAttempts {
				continue
			}
			return err
		}
	})
}

// reserial gives the restored VM's drives (key → serial) their serials,
// in one write with the config's digest.
func (v vmRestoreOps) reserial(ctx context.Context, app, node string, vmid int, serials map[string]string) error {
	return v.r.step(app, "volume", fmt.Sprintf("the restored disks of vm %d take app %s's serials", vmid, app), func() error {
		conf, err := v.r.client.VMConfigOf(ctx, node, vmid, true)
		if err != nil {
			return err
		}
		set := map[string]string{}
		for key, serial := range serials {
			set[key] = withSerial(conf.Values[key], serial)
		}
		return v.r.client.UpdateVMConfig(ctx, node, vmid, &pve.VMConfigUpdate{Digest: conf.Digest, Set: set})
	})
}

// takeIdentity gives the restored VM the app's tags (its own user tags
// and project kept) and its Notes without the restore's lines.
func (v vmRestoreOps) takeIdentity(ctx context.Context, app, node string, vmid int) error {
	conf, err := v.r.client.VMConfigOf(ctx, node, vmid, true)
	if err != nil {
		return err
	}
	tags := plan.ParseTags(conf.Values["tags"])
	var user []string
	for _, t := range tags {
		if t != plan.TagManaged && !strings.HasPrefix(t, "corral-") {
			user = append(user, t)
		}
	}
	set := map[string]string{"tags": strings.Join(plan.AppTags(plan.App{Name: app, Project: projectOf(tags), Tags: user}), ";"),
		"description": plan.WithoutVMVolumeLines(conf.Values["description"])}
	return v.r.step(app, "config", "make vm "+strconv.Itoa(vmid)+" app "+app+"'s", func() error {
		return v.r.client.UpdateVMConfig(ctx, node, vmid, &pve.VMConfigUpdate{Digest: conf.Digest, Set: set})
	})
}

// withSerial is a drive value with its serial= set to serial.
func withSerial(drive, serial string) string {
	items := strings.Split(drive, ",")
	out := items[:1]
	for _, item := range items[1:] {
		if !strings.HasPrefix(item, "serial=") {
			out = append(out, item)
		}
	}
	return strings.Join(append(out, "serial="+serial), ",")
}

// recoverVMRestores finishes or rolls back the VM restores an earlier
// corral left half done (plan.Observed.VMRestores): a restored VM that
// never took over while the app kept its VM is destroyed with its disks
// (the archive's copies); otherwise the switch is finished and the
// replaced VM removed, its retained disks given to the keeper VM first.
// The app's VM is started by the apply that follows.
func (v vmRestoreOps) recoverVMRestores(ctx context.Context, obs *plan.Observed) error {
	for _, app := range slices.Sorted(maps.Keys(obs.VMRestores)) {
		r := obs.VMRestores[app]
		var err error
		switch {
		case r.Rollback(obs):
			err = v.destroyRestored(ctx, app, r.New.Node, r.New.VMID)
		case r.New != nil:
			old := 0
			if r.Replaced != nil {
				old = r.Replaced.VMID
			}
			err = v.switchRestored(ctx, app, r.New.Node, r.New.VMID, old, r.Stamp)
			if err == nil && old != 0 {
				err = v.destroy(ctx, plan.Change{App: app, Kind: plan.KindVM, Node: r.Replaced.Node, OldVMID: old})
			}
		default:
			err = v.destroy(ctx, plan.Change{App: app, Kind: plan.KindVM, Node: r.Replaced.Node, OldVMID: r.Replaced.VMID})
		}
		if err != nil {
			return fmt.Errorf("recover the interrupted restore of VM app %s: %w", app, err)
		}
	}
	return nil
}

// destroyRestored destroys a restored VM that never took over, with its
// disks: it never ran, and its disks are copies the archive holds (no
// displaced disk was renamed yet). Its disks are not given to the keeper
// VM, which holds the app's own disks under the same serials.
func (v vmRestoreOps) destroyRestored(ctx context.Context, app, node string, vmid int) error {
	if err := v.stop(ctx, app, node, vmid); err != nil && !pve.IsNotFound(err) {
		return err
	}
	return v.r.step(app, "destroy", "the restored vm "+strconv.Itoa(vmid)+" that never took over", func() error {
		var upid string
		err := v.r.locked().Do(ctx, func() (err error) {
			upid, err = v.r.client.DestroyVM(ctx, node, vmid, pve.DestroyOptions{Purge: true, DestroyUnreferencedDisks: pve.Ptr(true)})
			return err
		})
		if pve.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return v.r.wait(ctx, app, upid)
	})
}
