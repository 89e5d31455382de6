package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// qemu-server's [special:cloudinit] section: the values the cloud-init
// drive was generated from, for each cloud-init key a running VM took
// since (vmconfig_hotplug_pending's cloudinit_record_changed), and the
// keys added since ("added"). GET .../cloudinit answers from it; the
// next regeneration (a start, PUT .../cloudinit) drops it, and it goes
// with the cloud-init drive.

// VMCloudInitRecord is a VM's [special:cloudinit] section. A section
// that became empty (a value changed and changed back) stays, empty,
// as in PVE, until the drive is regenerated with changes or removed.
type VMCloudInitRecord struct {
	Values map[string]string `json:"values,omitempty"`
}

// vmCloudInitPendingKey is cloudinit_pending_properties: the keys the
// drive carries (the cloud-init options and ipconfigN), name (the host
// name) and netN (the MACs).
func vmCloudInitPendingKey(k string) bool {
	return vmCloudKeys[k] || vmIPCfgRE.MatchString(k) || k == "name" || vmNetKeyRE.MatchString(k)
}

// vmCloudInitDriveRE is drive_is_cloudinit's volume name.
var vmCloudInitDriveRE = lazyre.New(`[:/]vm-\d+-cloudinit(?:\.(?:raw|qcow2|vmdk|qcow|qed|cloop))?$`)

// vmHasCloudInit is QemuConfig has_cloudinit: a drive of conf is the
// cloud-init drive.
func vmHasCloudInit(conf map[string]string) bool {
	for k, v := range conf {
		if vmDriveRE.MatchString(k) && vmCloudInitDriveRE.MatchString(vmDriveFile(v)) {
			return true
		}
	}
	return false
}

// vmRecordCloudInit is cloudinit_record_changed: key k of a running VM
// goes from old to new (nil: unset) at once; the section keeps what the
// drive was made from.
func vmRecordCloudInit(vm *VM, k string, old, new *string) {
	if !vmCloudInitPendingKey(k) {
		return
	}
	if vm.CloudInit == nil {
		vm.CloudInit = &VMCloudInitRecord{}
	}
	if old == nil && new == nil {
		return // the section is made even so, as qemu-server's //= {} makes it
	}
	if vm.CloudInit.Values == nil {
		vm.CloudInit.Values = map[string]string{}
	}
	ci := vm.CloudInit.Values
	added := map[string]bool{}
	for _, a := range vmSplitList(ci["added"]) {
		added[a] = true
	}
	delete(ci, "added")
	recorded, isRecorded := ci[k]
	switch {
	case new != nil && isRecorded && *new == recorded: // back to the drive's value
		delete(ci, k)
		delete(added, k)
	case new != nil && (isRecorded || added[k]): // changed again: nothing new
	case new != nil && old != nil:
		ci[k] = *old
	case new != nil:
		added[k] = true
	case isRecorded: // deleted, the drive's value already kept
	case added[k]:
		delete(added, k)
	default:
		ci[k] = *old
	}
	if len(added) > 0 {
		ci["added"] = strings.Join(slices.Sorted(maps.Keys(added)), ",")
	}
}

// vmSplitList is PVE::Tools::split_list.
func vmSplitList(s string) []string {
	var out []string
	for _, f := range vmDeleteSplitRE.Split(s, -1) {
		if f != "" {
			out = append(out, f)
		}
	}
	return out
}

// vmCloudInitRegenerated is apply_cloudinit_config's end: a drive
// generated from a section with changes drops the section.
func vmCloudInitRegenerated(vm *VM) {
	if vm.CloudInit != nil && len(vm.CloudInit.Values) > 0 {
		vm.CloudInit = nil
	}
}

// VMCloudInitPending is GET .../cloudinit (cloudinit_pending), with
// VM.Audit: the keys added since the drive was made (pending only), each
// set cloud-init option with the drive's value and, if it changed, the
// new one as pending, and the keys removed since (delete 1). The
// password shows as "**********".
func (q *vmConfig) VMCloudInitPending(auth Auth, node string, vmid int) ([]PendingEntry, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	vm, err := q.vmAuditLocked(auth, node, vmid)
	if err != nil {
		return nil, err
	}
	conf, ci := maps.Clone(vm.Config), map[string]string{}
	if vm.CloudInit != nil {
		maps.Copy(ci, vm.CloudInit.Values)
	}
	for _, m := range []map[string]string{conf, ci} {
		if _, ok := m["cipassword"]; ok {
			m["cipassword"] = vmHiddenPassword
		}
	}
	str := func(s string) *string { return &s }
	truthy := func(s string) bool { return s != "" && s != "0" } // Perl's truth
	added := ci["added"]
	delete(ci, "added")
	var out []PendingEntry
	for _, k := range vmSplitList(added) {
		e := PendingEntry{Key: k}
		if v, ok := conf[k]; ok {
			e.Pending = str(v)
		}
		out = append(out, e)
	}
	for _, k := range slices.Sorted(maps.Keys(vmCloudKeys)) {
		if !truthy(conf[k]) || strings.Contains(added, k) { // qemu-server matches $added =~ m/$opt/
			continue
		}
		e := PendingEntry{Key: k, Value: str(conf[k])}
		if truthy(ci[k]) {
			e.Value, e.Pending = str(ci[k]), str(conf[k])
		}
		out = append(out, e)
	}
	for _, k := range slices.Sorted(maps.Keys(ci)) {
		if !truthy(conf[k]) {
			out = append(out, PendingEntry{Key: k, Delete: 1})
		}
	}
	return out, nil
}

// VMCloudInitDump is GET .../cloudinit/dump (dump_cloudinit_config),
// with VM.Audit: the user data, network config or meta data the VM's
// current config makes, as the drive holds them; the password masked
// for a caller without VM.Config.Cloudinit (the meta data's
// instance-id is the unmasked data's).
func (q *vmConfig) VMCloudInitDump(auth Auth, node string, vmid int, typ string) (string, error) {
	q.stateMu.RLock()
	defer q.stateMu.RUnlock()
	vm, err := q.vmAuditLocked(auth, node, vmid)
	if err != nil {
		return "", err
	}
	ci, err := qemuCloudInit(vmid, vm.Config)
	if err != nil {
		return "", fmt.Errorf("VM %d's cloud-init config: %w", vmid, err)
	}
	switch typ {
	case "user":
		return ci.userData(!q.state().Access.HasPriv(auth, fmt.Sprintf("/vms/%d", vmid), "VM.Config.Cloudinit")), nil
	case "network":
		return ci.NetworkConfig(), nil
	case "meta":
		return ci.MetaData(), nil
	}
	return "", ParamError(map[string]string{"type": fmt.Sprintf("value '%s' does not have a value in the enumeration 'user, network, meta'", typ)})
}
