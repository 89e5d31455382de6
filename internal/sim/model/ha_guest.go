package model

import (
	"strconv"
	"strings"
)

// What being an HA resource changes for a CT or a VM outside the HA
// API (behaviour.md (i.1), (i.6), (i.7); qemu-server's vm_start,
// vm_stop, vm_shutdown, migrate_vm and destroy_vm have the same
// branches as pve-container's): start, stop and migrate requests become
// hastart, hastop and hamigrate tasks that only ask the CRM, destroy
// needs purge, and /cluster/resources shows hastate.

// haStateIn is the guest's hastate in /cluster/resources: its service
// state in the manager status, else its requested state in
// resources.cfg (as it is written there; "" when unset), else "".
func haStateIn(st *State, vmid int) string {
	if st.HA == nil {
		return ""
	}
	sid := st.sidOf(vmid)
	if s := st.HA.Services[sid]; s != nil {
		return s.State
	}
	if r := st.HA.Resources[sid]; r != nil {
		return r.State
	}
	return ""
}

// haGuest is what being an HA resource changes for a guest, asked by
// the CT's operations (ctPower, ctMigrator, ctDestroyer, ctCreator, node
// power) and the VM's (vmPower, vmMigrator, vmDestroyer). Besides haParts it holds the task runner for the hastart,
// hastop and hamigrate tasks, and the resources and rules it checks and
// purges.
type haGuest struct {
	haParts
	tasks interface {
		spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
	}
	resources interface {
		checkHAServiceStateLocked(sid, req string) error
		queueHAMotionLocked(sid, node string, relocate bool) error
	}
	rules interface{ purgeHARulesLocked(sid string) }
}

// haManagedLocked is vm_is_ha_managed (haManagedIn).
func (hg *haGuest) haManagedLocked(vmid int) bool { return haManagedIn(hg.state(), vmid) }

// haConfiguredLocked reports whether guest vmid has an HA resource at
// all (service_is_configured).
func (hg *haGuest) haConfiguredLocked(vmid int) bool {
	st := hg.state()
	return st.HA != nil && st.HA.Resources[st.sidOf(vmid)] != nil
}

// purgeHAResourceLocked drops guest vmid's HA resource (destroy with
// purge) and reports whether it had one. Call it while the guest is
// still in the State: its kind gives the sid.
func (hg *haGuest) purgeHAResourceLocked(vmid int) bool {
	st := hg.state()
	sid := st.sidOf(vmid)
	if st.HA == nil || st.HA.Resources[sid] == nil {
		return false
	}
	delete(st.HA.Resources, sid)
	hg.rules.purgeHARulesLocked(sid)
	hg.journal.markCore()
	hg.crm.kickCRM()
	return true
}

// haPowerRequestLocked is Status.pm's HA branch: for an HA-managed
// guest and a caller other than the HA stack, a start (want "started")
// or a stop or shutdown (want "stopped") is a hastart/hastop task that
// runs `ha-manager set <sid> --state <want>`. ok reports whether the
// request went that way. c.mu must be held.
func (hg *haGuest) haPowerRequestLocked(auth Auth, node string, vmid int, want string) (upid string, ok bool) {
	if auth.HA || !hg.haManagedLocked(vmid) {
		return "", false
	}
	typ, verb := "hastart", "start"
	if want == "stopped" {
		typ, verb = "hastop", "stop"
	}
	sid, kind := hg.sidKindLocked(vmid)
	return hg.tasks.spawn(auth, node, typ, strconv.Itoa(vmid), func(w *Worker) error {
		w.Log("Requesting HA %s for %s %d", verb, kind, vmid)
		return w.Do(func(st *State) error {
			if err := hg.resources.checkHAServiceStateLocked(sid, want); err != nil {
				w.logLocked("%s", PerlText(err))
				return Failf("command 'ha-manager set %s --state %s' failed: exit code 255\n", sid, want)
			}
			if r := hg.state().haConfig().Resources[sid]; r != nil {
				r.State = want
				hg.journal.markCore()
				hg.crm.kickCRM()
			}
			return nil
		})
	}), true
}

// haMigrateRequestLocked is migrate_vm's HA branch: a hamigrate task
// that queues the CRM's migrate of the guest to target and ends.
func (hg *haGuest) haMigrateRequestLocked(auth Auth, node string, vmid int, target string) (upid string, ok bool) {
	if auth.HA || !hg.haManagedLocked(vmid) {
		return "", false
	}
	sid, kind := hg.sidKindLocked(vmid)
	return hg.tasks.spawn(auth, node, "hamigrate", strconv.Itoa(vmid), func(w *Worker) error {
		w.Log("Requesting HA migration for %s %d to node %s", kind, vmid, target)
		return w.Do(func(st *State) error {
			if err := hg.resources.queueHAMotionLocked(sid, target, false); err != nil {
				w.logLocked("%s", PerlText(err))
				return Failf("command 'ha-manager migrate %s %s' failed: exit code 255\n", sid, target)
			}
			hg.journal.markCore()
			hg.crm.kickCRM()
			return nil
		})
	}), true
}

// sidKindLocked is guest vmid's HA sid and the word PVE's messages name
// its kind with ("CT", "VM").
func (hg *haGuest) sidKindLocked(vmid int) (sid, kind string) {
	sid = hg.state().sidOf(vmid)
	if strings.HasPrefix(sid, "vm:") {
		return sid, "VM"
	}
	return sid, "CT"
}

// haManageCreated is the end of create_vm's worker with ha-managed=1: the
// new CT becomes an HA resource, started when the create started it,
// else stopped. A failure is only warned, as PVE's eval/warn does.
func (hg *haGuest) haManageCreated(w *Worker, vmid int, managed, started bool) error {
	if !managed {
		return nil
	}
	w.Log("Add as HA resource")
	state := "stopped"
	if started {
		state = "started"
	}
	sid := haSID(vmid)
	var exists bool
	if err := w.Do(func(st *State) error {
		h := hg.state().haConfig()
		if exists = h.Resources[sid] != nil; !exists {
			h.Resources[sid] = &HAResource{State: state}
			hg.journal.markCore()
			hg.crm.kickCRM()
		}
		return nil
	}); err != nil {
		return err
	}
	if exists {
		w.Warn("create resource failed: resource ID '%s' already defined", sid)
	}
	return nil
}
