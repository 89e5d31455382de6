package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Restoring a VM backup: POST /nodes/{node}/qemu with archive=<backup
// volid> (qemu-server API2/Qemu.pm create_vm's restore branch and
// QemuServer.pm restore_vma_archive). The request checks the
// privileges, the archive and the override options, then reserves the
// VMID (create_and_lock_config: an existing VM only with force) and
// returns the UPID of task qmrestore, which recreates each disk of the
// archive as vm-<vmid>-disk-N on its storage (or on "storage"), writes
// their data and the backed-up config with the new volumes (unique=1:
// new MACs and SMBIOS UUID; always a new vmgenid), then the overrides.

// vmRestoreSpec is a restore request after its synchronous checks.
type vmRestoreSpec struct {
	auth     Auth
	node     string
	vmid     int
	archive  string // the backup's volid
	path     string // its file
	hostPath string // its path on a PVE node, for the log
	storage  string // "" keeps each disk's storage
	pool     string
	unique   bool
	start    bool
	live     bool
	existed  bool              // force over an existing VM
	override map[string]string // the config options given
}

// vmRestoreExtracted are create_vm's parameters that are not config.
var vmRestoreExtracted = []string{"vmid", "archive", "pool", "start", "unique", "force", "storage", "live-restore", "bwlimit", "ha-managed", "import-working-storage"}

// vmRestorer restores a VM from a vzdump backup (create_vm with
// archive, task qmrestore: qemu_restore*.go).
type vmRestorer struct {
	vmParts
	// volumes (ctConfig) is check_volume_access (the archive) and
	// check_bridge_access (a restored NIC's bridge).
	volumes interface {
		ctCheckVolumeAccessLocked(auth Auth, vmid int, volid, typ string) error
		ctCheckBridgeAccessLocked(auth Auth, value string) error
	}
	// power (vmPower) starts the restored VM (start=1).
	power vmStarter
}

// restoreVMLocked is create_vm with archive (the State's lock held).
func (q *vmRestorer) restoreVMLocked(auth Auth, node string, params map[string]string) (string, error) {
	spec, err := q.restoreCheckLocked(auth, node, params)
	if err != nil {
		return "", err
	}
	st := q.state()
	emsg := fmt.Sprintf("unable to restore VM %d -", spec.vmid)
	if n, ok := guestNodeLocked(st, spec.vmid); ok {
		vm := st.VMs[spec.vmid]
		if !isTrue(params["force"]) || vm == nil || n != node {
			kind := "VM"
			if vm == nil {
				kind = "CT"
			}
			return "", Failf("%s %s %d already exists on node '%s'\n", emsg, kind, spec.vmid, n)
		}
		if err := vmCheckLock(vm); err != nil {
			return "", Failf("%s %s", emsg, errText(err))
		}
		vm.Config["lock"] = "create"
		spec.existed = true
	} else {
		if st.VMs == nil {
			st.VMs = map[int]*VM{}
		}
		st.VMs[spec.vmid] = &VM{VMID: spec.vmid, Node: node, Config: map[string]string{"lock": "create"}}
	}
	if err := q.changedLocked(); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "qmrestore", strconv.Itoa(spec.vmid), func(w *Worker) error {
		return q.restoreTask(w, spec)
	}), nil
}

// restoreCheckLocked is create_vm's checks for a restore, in its order:
// the pool, the target storage, VM.PowerMgmt for start, VM.Allocate (or
// VM.Backup to overwrite an existing VM with force), no drive options,
// the caller's access to the archive, which must exist, then the
// override options' privileges; new NICs get their MACs.
func (q *vmRestorer) restoreCheckLocked(auth Auth, node string, params map[string]string) (vmRestoreSpec, error) {
	st := q.state()
	a := st.Access
	vmid, err := strconv.Atoi(params["vmid"])
	if err != nil {
		return vmRestoreSpec{}, ParamError(map[string]string{"vmid": "property is missing and it is not optional"})
	}
	spec := vmRestoreSpec{auth: auth, node: node, vmid: vmid, archive: params["archive"], storage: params["storage"], pool: params["pool"],
		unique: isTrue(params["unique"]), start: isTrue(params["start"]), live: isTrue(params["live-restore"])}
	if spec.pool != "" {
		if err := a.PoolExists(spec.pool); err != nil {
			return spec, err
		}
	}
	if spec.storage != "" {
		if err := a.Check(auth, "/storage/"+spec.storage, []string{"Datastore.AllocateSpace"}, false); err != nil {
			return spec, err
		}
	}
	vmPath := fmt.Sprintf("/vms/%d", vmid)
	if spec.start && !a.HasPriv(auth, vmPath, "VM.PowerMgmt") && (spec.pool == "" || !a.HasPriv(auth, "/pool/"+spec.pool, "VM.PowerMgmt")) {
		return spec, a.Check(auth, vmPath, []string{"VM.PowerMgmt"}, false)
	}
	vm := st.VMs[vmid]
	exists := vm != nil && vm.Node == node
	if !a.HasPriv(auth, vmPath, "VM.Allocate") && (spec.pool == "" || !a.HasPriv(auth, "/pool/"+spec.pool, "VM.Allocate")) &&
		!(isTrue(params["force"]) && exists && a.HasPriv(auth, vmPath, "VM.Backup")) {
		return spec, PermError("")
	}
	conf := maps.Clone(params)
	for _, k := range vmRestoreExtracted {
		delete(conf, k)
	}
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if vmDriveRE.MatchString(k) {
			return spec, ParamError(map[string]string{k: "option conflicts with option 'archive'"})
		}
	}
	if err := q.restoreArchiveLocked(auth, &spec); err != nil {
		return spec, err
	}
	if err := vmCheckModifyPermLocked(a, auth, vmid, slices.Collect(maps.Keys(conf))); err != nil {
		return spec, err
	}
	if err := q.restoreBridgesLocked(auth, conf); err != nil {
		return spec, err
	}
	for k, v := range conf {
		if vmNetKeyRE.MatchString(k) {
			conf[k] = vmNetWithMAC(v)
		}
	}
	spec.override = conf
	return spec, nil
}

// restoreArchiveLocked is check_volume_access for the archive ('backup'
// content) and classify_restore_archive's file: it must exist.
func (q *vmRestorer) restoreArchiveLocked(auth Auth, spec *vmRestoreSpec) error {
	if err := q.volumes.ctCheckVolumeAccessLocked(auth, spec.vmid, spec.archive, "backup"); err != nil {
		return err
	}
	st := q.state()
	sid, name, ok := ParseVolID(spec.archive)
	v := st.Volumes[st.volKey(spec.node, spec.archive)]
	if !ok || v == nil {
		return Failf("can't find file '%s'\n", spec.archive)
	}
	spec.path = q.storage.volumePath(spec.node, sid, name)
	spec.hostPath = q.storage.hostPath(st.storage(sid), name)
	return nil
}

// restoreBridgesLocked is check_bridge_access over conf's NICs (the
// override options, then check_restore_permissions' merged config).
func (q *vmRestorer) restoreBridgesLocked(auth Auth, conf map[string]string) error {
	if auth.IsRoot() {
		return nil
	}
	for _, k := range slices.Sorted(maps.Keys(conf)) {
		if vmNetKeyRE.MatchString(k) {
			if err := q.volumes.ctCheckBridgeAccessLocked(auth, conf[k]); err != nil {
				return err
			}
		}
	}
	return nil
}
