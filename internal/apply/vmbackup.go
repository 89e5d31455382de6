package apply

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
)

// Backups of kind: vm apps (issue 34): the same vzdump request as a
// container's, an archive vzdump-qemu-<vmid>-….vma.zst whose notes name
// the app as a container archive's do. What differs is consistency: a
// VM with the guest agent has its filesystems frozen (fs-freeze) while
// vzdump starts the copy and thawed after, so its snapshot-mode backup
// is app-consistent; without the agent, or when the agent does not
// answer, it is crash-consistent, as a container's is. Which one a
// backup got is read from the task's log, where vzdump says it.

// Consistency of a backup, as BackupResult.Consistency says it.
const (
	// ConsistentApp: the guest agent froze the filesystems for the copy.
	ConsistentApp = "app-consistent"
	// ConsistentCrash: the disks were copied while the guest ran on, as
	// after a power cut.
	ConsistentCrash = "crash-consistent"
	// ConsistentStopped: the guest was off (stopped, or stop mode) while
	// its disks were copied.
	ConsistentStopped = "consistent"
)

// AppVM returns the one VM of app, or an error that says what to do
// when there is none or more than one.
func AppVM(obs *plan.Observed, app string) (*plan.VM, error) {
	vms := obs.VMs[app]
	switch len(vms) {
	case 0:
		return nil, fmt.Errorf("app %s has no VM on this cluster (corral finds it by the tag %s%s); `corral status` lists the apps", app, plan.TagAppPrefix, app)
	case 1:
		return vms[0], nil
	}
	var ids []string
	for _, vm := range vms {
		ids = append(ids, strconv.Itoa(vm.VMID))
	}
	return nil, fmt.Errorf("app %s has %d VMs carrying its tag (%s), and corral cannot tell which is the app's: remove the tag from the others, then try again", app, len(vms), strings.Join(ids, ", "))
}

// IsVMApp reports whether app is a VM app on the cluster: it has a VM
// and no container.
func IsVMApp(obs *plan.Observed, app string) bool {
	return len(obs.VMs[app]) > 0 && len(obs.Apps[app]) == 0
}

// AppNode is the node of app's one guest, container or VM.
func AppNode(obs *plan.Observed, app string) (string, error) {
	if IsVMApp(obs, app) {
		vm, err := AppVM(obs, app)
		if err != nil {
			return "", err
		}
		return vm.Node, nil
	}
	ct, err := AppCT(obs, app)
	if err != nil {
		return "", err
	}
	return ct.Node, nil
}

// backupVM is Executor.Backup for a VM app.
func (b *backups) backupVM(ctx context.Context, obs *plan.Observed, app string, opts BackupOptions) (*BackupResult, error) {
	vm, err := AppVM(obs, app)
	if err != nil {
		return nil, err
	}
	res := &BackupResult{App: app, Kind: plan.KindVM, VMID: vm.VMID, Node: vm.Node, Mode: opts.Mode, Storage: opts.Storage,
		Excluded: []Excluded{}, Pruned: []string{}, Warnings: []string{}}
	return b.vzdump(ctx, res, opts, fmt.Sprintf("vm %d", vm.VMID), func(log []string) {
		res.Mode, res.Consistency, res.ConsistencyWhy = VMBackupConsistency(log, opts.Mode)
	})
}

// VMBackupConsistency reads from a VM backup task's log the mode vzdump
// used and how consistent the archive is, with why: vzdump logs
// "issuing guest-agent 'fs-freeze' command" when the agent froze the
// filesystems, and "skipping guest filesystem freeze - <reason>" when it
// did not (qemu-server's VZDump/QemuServer.pm qga_fs_freeze).
func VMBackupConsistency(log []string, mode string) (usedMode, consistency, why string) {
	usedMode, froze, failed, skipped := mode, false, "", ""
	for _, line := range log {
		if m, ok := strings.CutPrefix(line, "INFO: backup mode: "); ok {
			usedMode = strings.TrimSpace(m)
		}
		switch {
		case strings.Contains(line, "issuing guest-agent 'fs-freeze' command"):
			froze = true
		case strings.Contains(line, "unable to freeze guest fs"):
			failed = strings.TrimSpace(line)
		case strings.Contains(line, "skipping guest filesystem freeze - "):
			_, skipped, _ = strings.Cut(line, "skipping guest filesystem freeze - ")
		}
	}
	switch {
	case usedMode == "stop":
		return usedMode, ConsistentStopped, "the VM was shut down (or was off) while its disks were copied"
	case froze && failed == "":
		return usedMode, ConsistentApp, "the guest agent froze the VM's filesystems (fs-freeze) for the copy and thawed them after"
	case failed != "":
		return usedMode, ConsistentCrash, "the guest agent could not freeze the filesystems (" + failed + ")"
	case strings.Contains(skipped, "disabled in VM options"):
		return usedMode, ConsistentCrash, "the VM has no guest agent (vm.agent: false) or its fs-freeze is off, so nothing froze its filesystems"
	case strings.Contains(skipped, "agent configured but not running"):
		return usedMode, ConsistentCrash, "the guest agent did not answer (is qemu-guest-agent running in the guest?), so nothing froze its filesystems"
	case skipped != "":
		return usedMode, ConsistentCrash, "vzdump skipped the guest filesystem freeze: " + strings.TrimSpace(skipped)
	}
	return usedMode, ConsistentCrash, "vzdump did not freeze the guest's filesystems"
}

// IsVMArchive reports whether a backup volid is a VM's archive.
func IsVMArchive(volid string) bool { return strings.Contains(volid, "vzdump-qemu-") }
