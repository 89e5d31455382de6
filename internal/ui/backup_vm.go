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
	for _, n := range rp.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// WriteVMRestored prints a finished VM restore.
func WriteVMRestored(w io.Writer, res *apply.VMRestoreResult) {
	fmt.Fprintf(w, "Restored %s as app %s: vm %d on %s is %s (MAC %s).\n", res.Archive, res.Name, res.VMID, res.Node, res.Status, res.MAC)
}
