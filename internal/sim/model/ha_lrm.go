package model

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// The LRM's work for a service: the tasks pve-ha-lrm runs on the
// service's node as root@pam (PVE::HA::Resources::PVECT and PVEQemu
// start, shutdown, migrate). Each is decided in a CRM round under the
// lock, marked pending there, and started after the round through the
// API's own method, whose UPID the service then waits on.

// haLRM is the nodes' pve-ha-lrm. Besides haParts it holds the task
// runner and the API it starts its tasks through: ctPower's and
// vmPower's start and shutdown, ctMigrator's and vmMigrator's migrate.
type haLRM struct {
	haParts
	log   *slog.Logger
	tasks interface {
		spawn(auth Auth, node, typ, id string, fn func(w *Worker) error) string
	}
	power    haPower
	migrator interface {
		MigrateCT(auth Auth, node string, vmid int, params map[string]string) (string, error)
	}
	vms haVMOps
}

// haVMOps is what the LRM needs of vmPower and vmMigrator (PVEQemu's
// start, shutdown and migrate).
type haVMOps interface {
	StartVM(auth Auth, node string, vmid int, params map[string]string) (string, error)
	ShutdownVM(auth Auth, node string, vmid int, params map[string]string) (string, error)
	MigrateVM(auth Auth, node string, vmid int, params map[string]string) (string, error)
}

// lrmStartLocked starts guest g on its node. A guest whose volumes its
// node cannot see (local storage left on a dead node) gets the start
// task that fails as PVE's does when it activates them; anything else
// goes through StartCT or StartVM.
func (lrm *haLRM) lrmStartLocked(sid string, s *HAService, g haSubject) func() {
	node, vmid := s.Node, g.haVMID()
	typ, start := "vzstart", func() (string, error) { return lrm.power.StartCT(lrmAuth, node, vmid, nil) }
	if _, ok := g.(*VM); ok {
		typ, start = "qmstart", func() (string, error) { return lrm.vms.StartVM(lrmAuth, node, vmid, nil) }
	}
	if missing := lrm.missingVolumeLocked(g, node); missing != "" {
		s.UPID, s.UPIDNode = lrm.tasks.spawn(lrmAuth, node, typ, strconv.Itoa(vmid), func(w *Worker) error {
			return Failf("%s\n", missing)
		}), node
		return nil
	}
	return lrm.lrmTask(s, node, typ, start)
}

// guestVolumes are the volume IDs of g's config that a start
// activates: a CT's mount points, a VM's disks (not its cdroms: an ISO
// is not activated, and the cloud-init drive is made anew at start).
func guestVolumes(g haSubject) []string {
	var out []string
	switch g := g.(type) {
	case *Guest:
		for _, mp := range mountPoints(g.Config) {
			out = append(out, mp.Props["volume"])
		}
	case *VM:
		for _, k := range sortedConfigKeys(g.Config) {
			if !vmDriveRE.MatchString(k) {
				continue
			}
			if p, err := ParseProp(g.Config[k], "file"); err == nil && p["media"] != "cdrom" {
				out = append(out, p["file"])
			}
		}
	}
	return out
}

// missingVolumeLocked is the error activate_volumes gives on node for
// the first volume of g that node does not see, "" when it sees them
// all.
func (lrm *haLRM) missingVolumeLocked(g haSubject, node string) string {
	st := lrm.state()
	for _, volid := range guestVolumes(g) {
		sid, name, ok := ParseVolID(volid)
		if !ok {
			continue // a bind or device mount: nothing to activate
		}
		if st.Volumes[st.volKey(node, volid)] != nil {
			continue
		}
		if s := st.storage(sid); s != nil && s.Type == "lvmthin" {
			return fmt.Sprintf("no such logical volume %s/%s", s.VGName, name)
		}
		return fmt.Sprintf("volume '%s' does not exist", volid)
	}
	return ""
}

// lrmStopLocked shuts guest g down as the LRM does for a stop request
// (timeout 60 s, then hard).
func (lrm *haLRM) lrmStopLocked(s *HAService, g haSubject) func() {
	node, vmid := s.Node, g.haVMID()
	params := map[string]string{"timeout": "60", "forceStop": "1"}
	if _, ok := g.(*VM); ok {
		return lrm.lrmTask(s, node, "qmshutdown", func() (string, error) { return lrm.vms.ShutdownVM(lrmAuth, node, vmid, params) })
	}
	return lrm.lrmTask(s, node, "vzshutdown", func() (string, error) { return lrm.power.ShutdownCT(lrmAuth, node, vmid, params) })
}

// lrmMigrateLocked migrates the stopped guest g to the service's
// target, offline.
func (lrm *haLRM) lrmMigrateLocked(s *HAService, g haSubject) func() {
	node, vmid := s.Node, g.haVMID()
	params := map[string]string{"target": s.Target}
	if _, ok := g.(*VM); ok {
		return lrm.lrmTask(s, node, "qmigrate", func() (string, error) { return lrm.vms.MigrateVM(lrmAuth, node, vmid, params) })
	}
	return lrm.lrmTask(s, node, "vzmigrate", func() (string, error) { return lrm.migrator.MigrateCT(lrmAuth, node, vmid, params) })
}

// lrmTask marks s pending and returns the work that starts the task
// (of type typ) and records its UPID. A request refused at once is the
// LRM worker's failure: logged, and seen by the CRM as a failed typ.
func (lrm *haLRM) lrmTask(s *HAService, node, typ string, start func() (string, error)) func() {
	s.UPID, s.UPIDNode = pendingUPID, node
	return func() {
		upid, err := start()
		lrm.stateMu.Lock()
		defer lrm.stateMu.Unlock()
		if s.UPID != pendingUPID {
			return // the service was dropped or moved on meanwhile
		}
		if err != nil {
			lrm.logLocked("err", "%s", strings.TrimRight(PerlText(err), "\n"))
			upid = failedUPID + typ
		}
		s.UPID, s.UPIDNode = upid, node
		lrm.journal.markCore()
		if err := lrm.journal.saveLocked(); err != nil {
			lrm.log.Error("save state after an HA task", "err", err)
		}
	}
}

// failedUPID prefixes the task type of LRM work refused before it had a
// task.
const failedUPID = "failed:"
