package model

import (
	"maps"
	"slices"
	"strings"
)

// One HA service's next state in a CRM round (Manager.pm next_state_*),
// and the LRM work that goes with it.

// lrmAuth is the identity of the LRM's own requests: root@pam in the HA
// environment, so they act instead of becoming HA requests.
var lrmAuth = Auth{UserID: "root@pam", HA: true}

// crmServiceLocked moves service sid on by one step and returns the LRM
// work to start outside the lock, if any.
func (crm *haCRM) crmServiceLocked(sid string) func() {
	st := crm.state()
	h := st.HA
	s, r := h.Services[sid], h.Resources[sid]
	g := st.haGuest(sid)
	if g == nil || r == nil {
		return nil
	}
	if s.State != "fence" && s.State != "recovery" && g.haNode() != s.Node && s.UPID == "" {
		crm.logLocked("info", "fixup service '%s' location (%s => %s)", sid, s.Node, g.haNode())
		s.Node = g.haNode()
	}
	done, ok, typ := crm.lrmResultLocked(s)
	if s.UPID != "" {
		return nil // the LRM is still at it
	}
	req := r.requested()
	switch s.State {
	case "fence":
		return nil // wait until fenced (crmFenceLocked)
	case "recovery":
		crm.crmRecoverLocked(sid, s, g, req)
		return nil
	case "error":
		if req == "disabled" {
			s.FailedNodes = nil
			crm.setServiceStateLocked(sid, "stopped", "")
		}
		return nil
	}
	if crm.offlineForLocked(s.Node, fenceDelay) && req != "disabled" {
		crm.setServiceStateLocked(sid, "fence", "")
		return nil
	}
	if n := st.node(s.Node); n == nil || !n.Online {
		return nil
	}
	switch s.State {
	case "request_start":
		crm.setServiceStateLocked(sid, "started", "")
		return nil
	case "started":
		return crm.crmStartedLocked(sid, s, g, req, done && (typ == "vzstart" || typ == "qmstart"), ok)
	case "request_stop", "stopped":
		return crm.crmStoppedLocked(sid, s, g, req)
	case "relocate", "migrate":
		return crm.crmRelocateLocked(sid, s, g, req, done, ok, typ)
	}
	return nil
}

// lrmResultLocked collects the end of the LRM task in flight for s:
// done when it has ended (s.UPID is cleared), ok when it succeeded, and
// its type. A task still running leaves s.UPID set.
func (crm *haCRM) lrmResultLocked(s *HAService) (done, ok bool, typ string) {
	st := crm.state()
	if s.UPID == "" || s.UPID == pendingUPID {
		return false, false, ""
	}
	if typ, failed := strings.CutPrefix(s.UPID, failedUPID); failed {
		s.UPID, s.UPIDNode = "", ""
		return true, false, typ
	}
	for i := len(st.Tasks) - 1; i >= 0; i-- {
		t := st.Tasks[i]
		if t.UPID != s.UPID {
			continue
		}
		if t.Status == "running" {
			return false, false, ""
		}
		s.UPID, s.UPIDNode = "", ""
		return true, t.ExitStatus == "OK" || strings.HasPrefix(t.ExitStatus, "WARNINGS"), t.Type
	}
	s.UPID, s.UPIDNode = "", "" // the task fell off the list: count it failed
	return true, false, ""
}

// pendingUPID marks LRM work decided in a round and not yet started.
const pendingUPID = "pending"

// crmStartedLocked is next_state_started plus the LRM's start and its
// restart policy: the CT is kept running on its node; a failed start is
// retried max_restart times, then relocated to another allowed node
// until max_relocate relocations failed, then the service is in error.
func (crm *haCRM) crmStartedLocked(sid string, s *HAService, g haSubject, req string, started, ok bool) func() {
	st := crm.state()
	if req != "started" {
		crm.setServiceStateLocked(sid, "request_stop", "")
		return nil
	}
	r := st.HA.Resources[sid]
	switch {
	case started && ok:
		if len(s.FailedNodes) > 0 {
			crm.logLocked("info", "relocation policy successful for '%s' on node '%s', failed nodes: %s", sid, s.Node, strings.Join(s.FailedNodes, ", "))
			s.FailedNodes = nil
		}
		s.Running, s.Restarts = true, 0
	case started:
		if s.Restarts < r.maxRestart() {
			s.Restarts++
			crm.logLocked("warning", "restart policy: retry number %d for service '%s'", s.Restarts, sid)
			break
		}
		crm.logLocked("err", "unable to start service %s on local node after %d retries", sid, s.Restarts)
		s.Running = false
		s.FailedNodes = append(s.FailedNodes, s.Node)
		if len(s.FailedNodes) > r.maxRelocate() {
			crm.logLocked("err", "recovery policy for service %s failed, entering error state. Failed nodes: %s", sid, strings.Join(s.FailedNodes, ", "))
			crm.setServiceStateLocked(sid, "error", "")
			return nil
		}
		crm.logLocked("warning", "starting service %s on node '%s' failed, relocating service.", sid, s.Node)
		if next := crm.nextNodeLocked(sid, s); next != "" {
			s.Target = next
			crm.logLocked("info", "relocate service '%s' to node '%s'", sid, next)
			crm.setServiceStateLocked(sid, "relocate", "")
			return nil
		}
		s.Restarts = 0
	}
	if g.haRunning() {
		s.Running = true
		crm.crmEnforceRulesLocked(sid, s)
		return nil
	}
	return crm.lrm.lrmStartLocked(sid, s, g)
}

// crmEnforceRulesLocked is select_service_node for a running service: on
// a node its group or strict rule no longer allows, it is relocated to
// the first allowed one.
func (crm *haCRM) crmEnforceRulesLocked(sid string, s *HAService) {
	allowed := crm.rules.haAllowedNodesLocked(sid)
	if len(allowed) == 0 || slices.Contains(allowed, s.Node) {
		return
	}
	s.Target = allowed[0]
	crm.logLocked("info", "relocate service '%s' to node '%s'", sid, s.Target)
	crm.setServiceStateLocked(sid, "relocate", "")
}

// nextNodeLocked is select_service_node with try-next: an allowed online
// node where the service has not failed yet, "" when there is none.
func (crm *haCRM) nextNodeLocked(sid string, s *HAService) string {
	for _, n := range crm.rules.haAllowedNodesLocked(sid) {
		if n != s.Node && !slices.Contains(s.FailedNodes, n) {
			return n
		}
	}
	return ""
}

// crmStoppedLocked is next_state_request_stop and next_state_stopped:
// the LRM stops the CT; a stopped service whose resource asks for
// started is requested to start.
func (crm *haCRM) crmStoppedLocked(sid string, s *HAService, g haSubject, req string) func() {
	if g.haRunning() {
		return crm.lrm.lrmStopLocked(s, g)
	}
	if s.State == "request_stop" {
		crm.setServiceStateLocked(sid, "stopped", "")
		return nil
	}
	if req == "started" {
		crm.setServiceStateLocked(sid, "request_start", "")
	}
	return nil
}

// crmRelocateLocked is the LRM's relocate of a CT (PVECT.pm migrate):
// shut it down, migrate it offline, and leave it to be started on the
// target. A failed migration leaves it where it was.
func (crm *haCRM) crmRelocateLocked(sid string, s *HAService, g haSubject, req string, done, ok bool, typ string) func() {
	migrated := typ == "vzmigrate" || typ == "qmigrate"
	after := "started"
	if req != "started" {
		after = "request_stop"
	}
	switch {
	case done && migrated && ok:
		crm.setServiceStateLocked(sid, after, g.haNode())
		return nil
	case done && migrated:
		crm.logLocked("err", "service '%s' - migration failed (exit code 1)", sid)
		crm.setServiceStateLocked(sid, after, s.Node)
		return nil
	case g.haRunning():
		return crm.lrm.lrmStopLocked(s, g)
	}
	return crm.lrm.lrmMigrateLocked(s, g)
}

// crmRecoverLocked is next_state_recovery: the service goes to an
// allowed online node, by fewest services, without any storage check;
// its config is stolen from the fenced node after removing the locks a
// crash leaves behind.
func (crm *haCRM) crmRecoverLocked(sid string, s *HAService, g haSubject, req string) {
	st := crm.state()
	target := ""
	best := -1
	for _, n := range crm.rules.haAllowedNodesLocked(sid) {
		load := 0
		for _, o := range st.HA.Services {
			if o.Node == n {
				load++
			}
		}
		if best < 0 || load < best {
			target, best = n, load
		}
	}
	if target == "" {
		msg := "recovering service '" + sid + "' from fenced node '" + s.Node + "' failed, no recovery node found"
		if l := st.HA.Log; len(l) == 0 || !strings.HasSuffix(l[len(l)-1], msg) {
			crm.logLocked("err", "%s", msg)
		}
		if req == "disabled" {
			crm.setServiceStateLocked(sid, "stopped", "")
		}
		return
	}
	crm.logLocked("info", "recover service '%s' from fenced node '%s' to node '%s'", sid, s.Node, target)
	if l := g.Lock(); slices.Contains(recoverableLocks, l) {
		crm.logLocked("info", "removed leftover lock '%s' from recovered service '%s' to allow its start.", l, sid)
	}
	crm.stealLocked(g, target)
	next := "started"
	if req != "started" {
		next = "request_stop"
	}
	crm.setServiceStateLocked(sid, next, target)
}

// stealLocked is steal_service: guest g's config moves to target with
// a leftover lock of recoverableLocks removed, and the guest is off (its
// node was fenced).
func (crm *haCRM) stealLocked(g haSubject, target string) {
	switch g := g.(type) {
	case *Guest:
		if slices.Contains(recoverableLocks, g.Lock()) {
			delete(g.Config, "lock")
		}
		if g.Running {
			crm.power.markStoppedLocked(g)
		}
		g.Node = target
		crm.journal.markGuest(g.VMID)
	case *VM:
		if slices.Contains(recoverableLocks, g.Lock()) {
			delete(g.Config, "lock")
		}
		markVMFencedLocked(g)
		g.Node = target
		crm.journal.markCore()
	}
}

// markVMFencedLocked records VM vm off as its fenced node's watchdog
// left it: the emulator's node power-off stops no VM runtime, so the
// record is all there is to change.
func markVMFencedLocked(vm *VM) {
	vm.Running, vm.PID, vm.StartedAt = false, 0, 0
}

// recoverableLocks are the config locks recovery removes
// (Manager.pm fence_recovery_cleanup).
var recoverableLocks = []string{"backup", "mounted", "migrate", "clone", "rollback", "snapshot", "snapshot-delete", "suspending", "suspended"}

// crmFenceLocked is Manager.pm's fencing: a node with fenced services
// goes to fence; once its agent lock can be had (agentLockLifetime
// after it went, or at once when it is back and its LRM let go), the
// fence is acknowledged, its CTs are off (the watchdog reset the node)
// and its fenced services go to recovery.
func (crm *haCRM) crmFenceLocked() {
	st := crm.state()
	h := st.HA
	var nodes []string
	for _, sid := range slices.Sorted(maps.Keys(h.Services)) {
		if s := h.Services[sid]; s.State == "fence" && !slices.Contains(nodes, s.Node) {
			nodes = append(nodes, s.Node)
		}
	}
	for _, node := range nodes {
		if old := h.NodeState[node]; old != "fence" {
			h.NodeState[node] = "fence"
			crm.logLocked("info", "node '%s': state changed from '%s' => 'fence'", node, old)
		}
		n := st.node(node)
		if n == nil || (!n.Online && !crm.offlineForLocked(node, agentLockLifetime)) {
			continue
		}
		crm.logLocked("info", "fencing: acknowledged - got agent lock for node '%s'", node)
		h.NodeState[node] = "unknown"
		crm.logLocked("info", "node '%s': state changed from 'fence' => 'unknown'", node)
		if !n.Online {
			n.PoweredOff = true
			for _, g := range st.Guests {
				if g.Node == node && g.Running {
					crm.power.markStoppedLocked(g)
				}
			}
			for _, vm := range st.VMs {
				if vm.Node == node && vm.Running {
					markVMFencedLocked(vm)
				}
			}
		}
		for _, sid := range slices.Sorted(maps.Keys(h.Services)) {
			if s := h.Services[sid]; s.State == "fence" && s.Node == node {
				crm.setServiceStateLocked(sid, "recovery", "")
			}
		}
	}
}
