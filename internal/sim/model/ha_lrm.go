package model

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// The LRM's work for a service: the tasks pve-ha-lrm runs on the
// service's node as root@pam (PVE::HA::Resources::PVECT start, shutdown,
// migrate). Each is decided in a CRM round under the lock, marked
// pending there, and started after the round through the API's own
// method, whose UPID the service then waits on.

// haLRM is the nodes' pve-ha-lrm. Besides haParts it holds the task
// runner and the API it starts its tasks through: ctPower's start and
// shutdown, ctMigrator's migrate.
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
}

// lrmStartLocked starts CT g on its node. A CT whose volumes its node
// cannot see (local storage left on a dead node) gets the vzstart that
// fails as PVE's does when it activates them; anything else goes
// through StartCT.
func (lrm *haLRM) lrmStartLocked(sid string, s *HAService, g *Guest) func() {
	node, vmid := s.Node, g.VMID
	if missing := lrm.missingVolumeLocked(g, node); missing != "" {
		s.UPID, s.UPIDNode = lrm.tasks.spawn(lrmAuth, node, "vzstart", strconv.Itoa(vmid), func(w *Worker) error {
			return Failf("%s\n", missing)
		}), node
		return nil
	}
	return lrm.lrmTask(s, node, "vzstart", func() (string, error) { return lrm.power.StartCT(lrmAuth, node, vmid, nil) })
}

// missingVolumeLocked is the error activate_volumes gives on node for
// the first mount point volume of g that node does not see, "" when it
// sees them all.
func (lrm *haLRM) missingVolumeLocked(g *Guest, node string) string {
	st := lrm.state()
	for _, mp := range mountPoints(g.Config) {
		volid := mp.Props["volume"]
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

// lrmStopLocked shuts CT g down as the LRM does for a stop request
// (timeout 60 s, then hard).
func (lrm *haLRM) lrmStopLocked(s *HAService, g *Guest) func() {
	node, vmid := s.Node, g.VMID
	return lrm.lrmTask(s, node, "vzshutdown", func() (string, error) {
		return lrm.power.ShutdownCT(lrmAuth, node, vmid, map[string]string{"timeout": "60", "forceStop": "1"})
	})
}

// lrmMigrateLocked migrates the stopped CT g to the service's target.
func (lrm *haLRM) lrmMigrateLocked(s *HAService, g *Guest) func() {
	node, vmid, target := s.Node, g.VMID, s.Target
	return lrm.lrmTask(s, node, "vzmigrate", func() (string, error) {
		return lrm.migrator.MigrateCT(lrmAuth, node, vmid, map[string]string{"target": target})
	})
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
