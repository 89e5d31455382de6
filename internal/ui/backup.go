package ui

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui/human"
)

// WriteBackup prints a backup's result: the archive, and what it leaves
// out (volumes with backup=0, bind mounts).
func WriteBackup(w io.Writer, r *apply.BackupResult) {
	if r.Kind == plan.KindVM {
		writeVMBackup(w, r) // backup_vm.go
		return
	}
	fmt.Fprintf(w, "Backed up app %s (ct %d on %s, %s mode) in %s.\n", r.App, r.VMID, r.Node, r.Mode, r.Duration.Round(10*time.Millisecond))
	fmt.Fprintf(w, "  archive  %s\n  size     %s\n", r.Archive, human.Size(r.Size))
	if r.Mode == "snapshot" {
		fmt.Fprintln(w, "  (a container has no guest agent: a snapshot-mode backup of a running app is crash-consistent; use --mode stop for a quiesced one)")
	}
	bind := 0
	if len(r.Excluded) == 0 {
		fmt.Fprintln(w, "The archive holds the root file system and every volume; the container has no bind mounts.")
	} else {
		fmt.Fprintln(w, "NOT in this archive:")
		for _, e := range r.Excluded {
			what := "volume " + e.Name
			if e.Name == "" {
				what = e.Kind + " " + e.Source
			}
			if e.Kind != "volume" {
				bind++
				what = e.Kind + " mount " + e.Source
			}
			fmt.Fprintf(w, "  - %s (%s at %s): %s\n", what, e.Key, e.Mount, e.Reason)
		}
		if bind == 0 {
			fmt.Fprintln(w, "The container has no bind mounts.")
		}
	}
	for _, p := range r.Pruned {
		fmt.Fprintf(w, "Pruned %s (older than the newest kept archives).\n", p)
	}
}

// WriteRestorePlan prints what a restore is about to do.
func WriteRestorePlan(w io.Writer, rp *apply.RestorePlan) {
	fmt.Fprintf(w, "Restore %s\n  into new ct %d on %s (storage %s) as app %s, hostname %s, new MAC\n", rp.Archive, rp.VMID, rp.Node, rp.Storage, rp.Name, rp.Hostname)
	for _, v := range rp.Volumes {
		how := "restored from the archive"
		if v.Empty {
			how = "EMPTY (backup=0: not in the archive)"
		}
		fmt.Fprintf(w, "  volume %s at %s: %s, then moved into the keeper as %s/%s\n", v.Name, v.Mount, how, rp.Name, v.Name)
	}
	for _, r := range rp.Renamed {
		fmt.Fprintf(w, "  keeper record %s (%s) is kept, renamed %s\n", r.From, r.VolID, r.To)
	}
	if rp.Replace {
		fmt.Fprintf(w, "  replaces ct %d: stopped just before the new one starts, destroyed once it runs (its volumes stay in the keeper)\n", rp.OldVMID)
	}
	for _, n := range rp.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// WriteRestored prints a finished restore.
func WriteRestored(w io.Writer, res *apply.RestoreResult) {
	fmt.Fprintf(w, "Restored %s as app %s: ct %d on %s is %s (hostname %s, MAC %s).\n", res.Archive, res.Name, res.VMID, res.Node, res.Status, res.Hostname, res.MAC)
	for _, v := range res.Volumes {
		note := ""
		if v.Empty {
			note = " (empty: backup=0)"
		}
		fmt.Fprintf(w, "  volume %s at %s: %s, kept by the keeper%s\n", v.Name, v.Mount, v.VolID, note)
	}
	for _, r := range res.Renamed {
		fmt.Fprintf(w, "  the volume recorded as %s (%s) is kept as %s\n", r.From, r.VolID, r.To)
	}
	if res.Destroyed != 0 {
		fmt.Fprintf(w, "  the old container %d was destroyed; its volumes stay in the keeper\n", res.Destroyed)
	}
}

// WriteBackups lists backup archives, one row each; none is said in a
// sentence, not an empty table.
func WriteBackups(w io.Writer, list []apply.Archive) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No backups found.")
		return err
	}
	t := NewTable(w, "APP", "ARCHIVE", "SIZE", "TIME", "PROTECTED", "GUEST")
	for _, a := range list {
		prot := "no"
		if a.Protected {
			prot = "yes"
		}
		guest := "ct " + strconv.Itoa(a.VMID)
		if a.Kind == plan.KindVM {
			guest = "vm " + strconv.Itoa(a.VMID)
		}
		t.Row(a.App, a.VolID, human.Size(a.Size), a.Time.Format(time.RFC3339), prot, guest)
	}
	return t.Flush()
}

// WriteSnapshots lists a container's snapshots, oldest first; * marks
// the one the container runs from.
func WriteSnapshots(w io.Writer, snaps []apply.SnapshotInfo) error {
	vm := len(snaps) > 0 && snaps[0].RAM != nil
	cols := []string{"NAME", "TIME", "CURRENT", "DESCRIPTION"}
	if vm {
		cols = []string{"NAME", "TIME", "CURRENT", "RAM", "DESCRIPTION"}
	}
	t := NewTable(w, cols...)
	for _, s := range snaps {
		cur := ""
		if s.Current {
			cur = "*"
		}
		row := []string{s.Name, s.Time.Format(time.RFC3339), cur}
		if vm && s.RAM != nil {
			ram := "no"
			if *s.RAM {
				ram = "yes"
			}
			row = append(row, ram)
		}
		t.Row(append(row, strings.ReplaceAll(s.Description, "\n", " "))...)
	}
	return t.Flush()
}

// WriteSnapshotTaken says that snapshot name of app (ct vmid) was taken,
// what it covers (covers: "rootfs", "volume NAME (MOUNT)"), and the
// commands that go back to it and remove it.
func WriteSnapshotTaken(w io.Writer, app string, vmid int, name string, covers []string) {
	fmt.Fprintf(w, "Snapshot %s of app %s (ct %d) taken; `corral rollback %s %s` goes back to it.\n", name, app, vmid, app, name)
	fmt.Fprintf(w, "It covers %s: the volumes attached now. While it exists PVE will not move those volumes; `corral snapshot %s %s --delete` removes it.\n",
		strings.Join(covers, ", "), app, name)
}

// WriteVMSnapshotTaken says that snapshot name of VM app (vm vmid) was
// taken without the RAM state, what it covers (its disks, retained
// volumes by name, the config) and, when it holds retained volumes
// (retained), that they cannot go back to the keeper VM while it exists.
func WriteVMSnapshotTaken(w io.Writer, app string, vmid int, name string, covers []string, retained bool) {
	fmt.Fprintf(w, "Snapshot %s of app %s (vm %d) taken, without the RAM state: `corral rollback %s %s` goes back to it and boots the VM from its disks as they were.\n",
		name, app, vmid, app, name)
	fmt.Fprintf(w, "It covers %s.\n", strings.Join(covers, ", "))
	if retained {
		fmt.Fprintf(w, "While it exists PVE will not move those disks to another VM, so the app's volumes cannot go back to the keeper VM: apply refuses a replace or destroy of the app, or a volume dropped from the manifest, until `corral snapshot %s %s --delete` removes it.\n",
			app, name)
		return
	}
	fmt.Fprintf(w, "`corral snapshot %s %s --delete` removes it.\n", app, name)
}

// WriteSnapshotDeleted says that snapshot name of app (kind vmid, kind
// "ct" or "vm") was removed.
func WriteSnapshotDeleted(w io.Writer, app, kind string, vmid int, name string) {
	fmt.Fprintf(w, "Snapshot %s of app %s (%s %d) removed.\n", name, app, kind, vmid)
}

// WriteNoSnapshots is corral snapshots' answer for an app (kind vmid)
// without any.
func WriteNoSnapshots(w io.Writer, app, kind string, vmid int) {
	fmt.Fprintf(w, "App %s (%s %d) has no snapshots.\n", app, kind, vmid)
}

// WriteRolledBack says that app (kind vmid) was rolled back to snapshot
// name.
func WriteRolledBack(w io.Writer, app, kind string, vmid int, name string) {
	fmt.Fprintf(w, "App %s (%s %d) rolled back to %s.\n", app, kind, vmid, name)
}

// WritePowerState is corral start's, stop's and restart's answer: where
// the app's container is and its status now.
func WritePowerState(w io.Writer, app string, ct *plan.CT) {
	fmt.Fprintf(w, "App %s (ct %d on %s) is %s.\n", app, ct.VMID, ct.Node, ct.Status)
}

// WriteRestoredPinNote warns (on stderr) that the manifest at path pins
// app to vmid pinned while the restore made it ct vmid: the next apply
// would replace the restored container unless the pin follows.
func WriteRestoredPinNote(w io.Writer, path, app string, pinned, vmid int) {
	fmt.Fprintf(w, "note: %s pins vmid %d for app %s, which now runs as ct %d: set vmid: %d (or remove it), or the next apply replaces the restored container\n",
		path, pinned, app, vmid, vmid)
}
