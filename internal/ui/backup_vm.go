package ui

import (
	"fmt"
	"io"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/ui/human"
)

// writeVMBackup prints a VM app's backup: the archive and how consistent
// it is, with why (the guest agent froze the filesystems, or did not).
func writeVMBackup(w io.Writer, r *apply.BackupResult) {
	fmt.Fprintf(w, "Backed up app %s (vm %d on %s, %s mode) in %s.\n", r.App, r.VMID, r.Node, r.Mode, r.Duration.Round(10*time.Millisecond))
	fmt.Fprintf(w, "  archive  %s\n  size     %s\n", r.Archive, human.Size(r.Size))
	fmt.Fprintf(w, "  %s: %s\n", r.Consistency, r.ConsistencyWhy)
	if r.Consistency == apply.ConsistentCrash {
		fmt.Fprintln(w, "  (not app-consistent: the disks were copied while the guest ran on, as after a power cut; use --mode stop for a quiesced one)")
	}
	for _, p := range r.Pruned {
		fmt.Fprintf(w, "Pruned %s (older than the newest kept archives).\n", p)
	}
}

// WriteVMRestorePlan prints what a VM restore is about to do.
func WriteVMRestorePlan(w io.Writer, rp *apply.VMRestorePlan) {
	storage := rp.Storage
	if storage == "" {
		storage = "each disk's archived storage"
	}
	fmt.Fprintf(w, "Restore %s\n  into new vm %d on %s (%s) as app %s, then start it\n", rp.Archive, rp.VMID, rp.Node, storage, rp.Name)
	for _, v := range rp.Volumes {
		if v.Empty {
			fmt.Fprintf(w, "  volume %s (%s): not in the archive (backup=0), no disk restored\n", v.Name, v.Key)
			continue
		}
		fmt.Fprintf(w, "  volume %s (%s): restored from the archive as a retained disk of app %s (serial %s)\n", v.Name, v.Key, rp.Name, v.Serial)
	}
	for _, r := range rp.Renamed {
		fmt.Fprintf(w, "  the disk of %s (%s) is kept on the keeper VM, renamed %s\n", r.From, r.VolID, r.To)
	}
	if rp.Replace {
		fmt.Fprintf(w, "  replaces vm %d: stopped and its retained disks given to the keeper VM before the new one starts, destroyed once it runs\n", rp.OldVMID)
	}
	for _, n := range rp.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// WriteVMRestored prints a finished VM restore.
func WriteVMRestored(w io.Writer, res *apply.VMRestoreResult) {
	fmt.Fprintf(w, "Restored %s as app %s: vm %d on %s is %s (MAC %s).\n", res.Archive, res.Name, res.VMID, res.Node, res.Status, res.MAC)
	for _, v := range res.Volumes {
		if !v.Empty {
			fmt.Fprintf(w, "  volume %s: a retained disk of the vm (serial %s)\n", v.Name, v.Serial)
		}
	}
	for _, r := range res.Renamed {
		fmt.Fprintf(w, "  the disk recorded as %s (%s) is kept as %s\n", r.From, r.VolID, r.To)
	}
	if res.Destroyed != 0 {
		fmt.Fprintf(w, "  the old vm %d was destroyed; its retained disks stay on the keeper VM\n", res.Destroyed)
	}
}
