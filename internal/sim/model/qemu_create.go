package model

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Creating a VM: POST /nodes/{node}/qemu (qemu-server API2/Qemu.pm
// create_vm), from scratch or with disks imported (import-from). The
// request checks the privileges and the drives, reserves the VMID with
// a config holding "lock: create", and returns the UPID of task
// qmcreate, which allocates the disks and writes the real config.

// vmCreator creates VMs (qemu_create.go), with their drives parsed and
// checked (qemu_drive.go) and their disks allocated or imported
// (qemu_disk.go, qemu_import.go); a config change and a clone use its
// drive checks. A create with archive is vmRestorer's.
type vmCreator struct {
	vmParts
	// power (vmPower) starts the new VM (start=1).
	power vmStarter
	// restorer (vmRestorer) is create_vm's restore branch.
	restorer interface {
		restoreVMLocked(auth Auth, node string, params map[string]string) (string, error)
	}
}

// CreateVM is create_vm without archive (no restore).
func (q *vmCreator) CreateVM(auth Auth, node string, params map[string]string) (string, error) {
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	st := q.state()
	if err := q.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	if params["archive"] != "" {
		return q.restorer.restoreVMLocked(auth, node, params)
	}
	vmid, err := strconv.Atoi(params["vmid"])
	if err != nil {
		return "", ParamError(map[string]string{"vmid": "property is missing and it is not optional"})
	}
	conf := maps.Clone(params)
	for _, k := range []string{"vmid", "pool", "start", "unique", "force", "storage", "live-restore", "bwlimit", "ha-managed", "import-working-storage"} {
		delete(conf, k)
	}
	if err := q.checkCreatePermLocked(auth, vmid, params["pool"], conf); err != nil {
		return "", err
	}
	drives, err := q.parseDrivesLocked(auth, node, conf)
	if err != nil {
		return "", err
	}
	if g := st.Guests[vmid]; g != nil {
		return "", Failf("unable to create VM %d - CT %d already exists on node '%s'\n", vmid, vmid, g.Node)
	}
	if vm := st.VMs[vmid]; vm != nil {
		return "", Failf("unable to create VM %d - VM %d already exists on node '%s'\n", vmid, vmid, vm.Node)
	}
	if st.VMs == nil {
		st.VMs = map[int]*VM{}
	}
	st.VMs[vmid] = &VM{VMID: vmid, Node: node, Config: map[string]string{"lock": "create"}}
	if pool := params["pool"]; pool != "" {
		st.Access.addToPool(vmid, pool)
	}
	if err := q.changedLocked(); err != nil {
		return "", err
	}
	start := isTrue(params["start"])
	return q.tasks.spawn(auth, node, "qmcreate", strconv.Itoa(vmid), func(w *Worker) error {
		return q.createTask(w, auth, node, vmid, conf, drives, start)
	}), nil
}

// checkCreatePermLocked is create_vm's checks before the drives: the
// pool, VM.Allocate on the VM (or its pool), then each key's privilege.
func (q *vmCreator) checkCreatePermLocked(auth Auth, vmid int, pool string, conf map[string]string) error {
	a := q.state().Access
	if pool != "" {
		if err := a.PoolExists(pool); err != nil {
			return err
		}
	}
	if !a.HasPriv(auth, fmt.Sprintf("/vms/%d", vmid), "VM.Allocate") &&
		(pool == "" || !a.HasPriv(auth, "/pool/"+pool, "VM.Allocate")) {
		return PermError("")
	}
	return vmCheckModifyPermLocked(a, auth, vmid, slices.Collect(maps.Keys(conf)))
}

// createTask is the qmcreate worker: allocate each disk (and the
// cloud-init drive) under the State's lock, fill them outside it (an
// import copies hundreds of MB: the emulator keeps answering), then
// write the config without the lock, with the MACs and the generated
// keys; on a failure free what it made and drop the config.
func (q *vmCreator) createTask(w *Worker, auth Auth, node string, vmid int, conf map[string]string, drives []vmDrive, start bool) error {
	var made []string
	var fills []vmFill
	err := w.Do(func(st *State) error {
		for _, d := range drives {
			volid, fill, err := q.makeDriveLocked(w.logLocked, node, vmid, d)
			if err != nil {
				return err
			}
			if volid != "" {
				made, fills = append(made, volid), append(fills, fill)
			}
			conf[d.key] = d.props.Print("file")
		}
		return nil
	})
	for _, fill := range fills {
		if err == nil {
			err = fill(w.Log)
		}
	}
	if err == nil {
		err = w.Do(func(st *State) error {
			vmFillDefaults(conf, q.clock())
			st.VMs[vmid].Config = conf
			q.journal.markCore()
			return nil
		})
	}
	if err != nil {
		w.cleanup(func(st *State) {
			for _, volid := range made {
				q.storage.freeVolumeLocked(node, volid)
			}
			delete(st.VMs, vmid)
			st.Access.RemoveVMAccess(vmid)
			q.journal.markCore()
		})
		return fmt.Errorf("unable to create VM %d - %w", vmid, err)
	}
	if start {
		return q.power.startTask(w, node, vmid)
	}
	return nil
}
