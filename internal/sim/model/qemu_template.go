package model

import (
	"strconv"
	"strings"
)

// TemplateVM is POST /nodes/{node}/qemu/{vmid}/template (qemu-server
// API2/Qemu.pm template, QemuServer template_create): task qmtemplate
// sets template: 1 and makes each disk (or only disk) a base volume,
// vm-<vmid>-disk-N renamed base-<vmid>-disk-N, which linked clones
// share. A template no longer starts.
func (q *vmCloner) TemplateVM(auth Auth, node string, vmid int, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	disk := params["disk"]
	if err := q.templateCheckLocked(node, vmid, disk); err != nil {
		return "", err
	}
	return q.tasks.spawn(auth, node, "qmtemplate", strconv.Itoa(vmid), func(w *Worker) error {
		release, err := q.vmLocks.acquire(w.ctx, vmid, configLockTimeout)
		if err != nil {
			return err
		}
		defer release()
		return w.Do(func(st *State) error {
			if err := q.templateCheckLocked(node, vmid, disk); err != nil {
				return err
			}
			return q.templateCreateLocked(w, node, vmid, disk)
		})
	}), nil
}

// templateCheckLocked is the template call's load_and_check.
func (q *vmCloner) templateCheckLocked(node string, vmid int, disk string) error {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	if err := vmCheckLock(vm); err != nil {
		return err
	}
	if len(vm.Snapshots) > 0 {
		return Failf("unable to create template, because VM contains snapshots\n")
	}
	if isTrue(vm.Config["template"]) && disk == "" {
		return Failf("you can't convert a template to a template\n")
	}
	if vm.Running {
		return Failf("you can't convert a VM to template if VM is running\n")
	}
	return nil
}

// templateCreateLocked is template_create: every disk but cdroms (and
// the cloud-init drive) becomes a base volume; every storage the
// emulator serves has the 'template' feature.
func (q *vmCloner) templateCreateLocked(w *Worker, node string, vmid int, disk string) error {
	vm, err := q.vmLocked(node, vmid)
	if err != nil {
		return err
	}
	vm.Config["template"] = "1"
	q.journal.markCore()
	for _, d := range q.vmVolumeDrivesLocked(node, vm.Config) {
		if disk != "" && d.key != disk {
			continue
		}
		volid, lines, err := q.bases.createBaseLocked(node, d.drive["file"])
		for _, l := range lines {
			w.logLocked("%s", l)
		}
		if err != nil {
			return err
		}
		d.drive["file"] = volid
		vm.Config[d.key] = d.drive.Print("file")
	}
	return nil
}

// baseInUseLocked is destroy_vm's early check of a template: no base
// volume of it (disk or unusedN) may back a linked clone, whose name
// starts with the base's (volume_is_base_and_used).
func (q *vmCloner) baseInUseLocked(vm *VM) error {
	if !isTrue(vm.Config["template"]) {
		return nil
	}
	st := q.state()
	for k, val := range vm.Config {
		if !vmDriveRE.MatchString(k) && !ctKeyIs(k, "unused") {
			continue
		}
		d, err := ParseProp(val, "file")
		if err != nil || vmDriveIsCdrom(d) {
			continue
		}
		v := st.Volumes[st.volKey(vm.Node, d["file"])]
		if v == nil {
			continue
		}
		for _, o := range st.Volumes {
			if o.Node == v.Node && o.Storage == v.Storage && strings.HasPrefix(o.Name, v.Name+"/") {
				return Failf("base volume '%s' is still in use by linked cloned\n", d["file"])
			}
		}
	}
	return nil
}
