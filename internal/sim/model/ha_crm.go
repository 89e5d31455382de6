package model

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// The HA stack's loop: one goroutine per cluster plays pve-ha-crm (the
// manager: service and node states, fencing, recovery, the relocate
// policy; pve-ha-manager src/PVE/HA/Manager.pm, NodeStatus.pm) and the
// nodes' pve-ha-lrm (the start, stop and migrate tasks it runs as
// root@pam; LRM.pm), on the emulator's clock and time scale. A round
// decides under the cluster lock; the tasks it asks for are started
// after, through the API's own paths (StartCT, ShutdownCT, MigrateCT)
// with Auth.HA set, so they are the tasks PVE's LRM leaves.

// PVE's HA delays at time scale 1.
const (
	// crmCycle is the CRM's round (pve-ha-crm works every 10 s).
	crmCycle = 10 * time.Second
	// fenceDelay is how long a node must be offline before its
	// services are fenced (NodeStatus.pm $fence_delay).
	fenceDelay = 60 * time.Second
	// agentLockLifetime is how long the dead node's HA agent lock
	// lives after its last update (pmxcfs lock timeout): the CRM gets
	// it, so the fence is acknowledged, that long after the node went.
	agentLockLifetime = 120 * time.Second
	// minCRMCycle keeps a scaled-down loop from spinning.
	minCRMCycle = 10 * time.Millisecond
)

// haCRM is pve-ha-crm: the loop, and each service's next state
// (ha_crm_service.go). Besides haParts it holds the cluster's life, the
// task durations' scale, ctPower (a fenced CT is stopped), the LRM it
// hands the work to, and the rules that say where a service may run.
type haCRM struct {
	haParts
	log *slog.Logger
	// ctx is the cluster's life, wg counts its goroutines for Close.
	ctx   context.Context
	wg    *sync.WaitGroup
	tasks interface {
		scale(d time.Duration) time.Duration
	}
	power interface{ markStoppedLocked(g *Guest) }
	lrm   interface {
		lrmStartLocked(sid string, s *HAService, g haSubject) func()
		lrmStopLocked(s *HAService, g haSubject) func()
		lrmMigrateLocked(s *HAService, g haSubject) func()
	}
	rules interface {
		haAllowedNodesLocked(sid string) []string
	}
	// kick wakes the loop: a change to the HA config or a request kicks
	// it rather than waiting for the next round.
	kick chan struct{}
}

// startCRM starts the cluster's HA loop; Close stops it.
func (crm *haCRM) startCRM() {
	crm.kick = make(chan struct{}, 1)
	crm.wg.Add(1)
	go crm.runCRM()
}

// kickCRM wakes the CRM loop (it never blocks).
func (crm *haCRM) kickCRM() {
	select {
	case crm.kick <- struct{}{}:
	default:
	}
}

func (crm *haCRM) runCRM() {
	defer crm.wg.Done()
	cycle := max(crm.tasks.scale(crmCycle), minCRMCycle)
	t := time.NewTimer(cycle)
	defer t.Stop()
	for {
		actions, active := crm.crmRound()
		for _, a := range actions {
			a()
		}
		var tick <-chan time.Time
		if active {
			t.Reset(cycle)
			tick = t.C
		}
		select {
		case <-crm.ctx.Done():
			return
		case <-crm.kick:
		case <-tick:
		}
	}
}

// crmRound is one CRM round: node states, new and stale services, queued
// commands, each service's next state, fencing. It returns the LRM work
// to start without the lock, and whether HA has anything to watch.
func (crm *haCRM) crmRound() (actions []func(), active bool) {
	if !crm.haWatching() {
		return nil, false // no write lock: an idle round moves no ReadKey
	}
	crm.stateMu.Lock()
	defer crm.stateMu.Unlock()
	h := crm.state().HA
	if !haActive(h) {
		return nil, false
	}
	before := haDigest(h)
	crm.crmNodesLocked()
	crm.crmSyncServicesLocked()
	crm.crmCommandsLocked()
	for _, sid := range slices.Sorted(maps.Keys(h.Services)) {
		if a := crm.crmServiceLocked(sid); a != nil {
			actions = append(actions, a)
		}
	}
	crm.crmFenceLocked()
	if haDigest(h) != before {
		crm.journal.markCore()
		if err := crm.journal.saveLocked(); err != nil {
			crm.log.Error("save state after HA round", "err", err)
		}
	}
	return actions, true
}

// haWatching reports, under the read lock, whether HA has anything to
// watch (haActive).
func (crm *haCRM) haWatching() bool {
	crm.stateMu.RLock()
	defer crm.stateMu.RUnlock()
	st := crm.state()
	return haActive(st.HA)
}

// haActive reports whether h has a resource or a service.
func haActive(h *HA) bool {
	return h != nil && (len(h.Resources) > 0 || len(h.Services) > 0)
}

// offlineForLocked reports whether node has been offline at least d
// (scaled), as node_is_offline_delayed does.
func (crm *haCRM) offlineForLocked(node string, d time.Duration) bool {
	st := crm.state()
	n := st.node(node)
	if n == nil || n.Online {
		return false
	}
	return crm.clock().Sub(time.Unix(n.OfflineSince, 0)) >= crm.tasks.scale(d)
}

// crmNodesLocked is NodeStatus.pm update: an online node is online, an
// offline one unknown; fence is left to crmFenceLocked.
func (crm *haCRM) crmNodesLocked() {
	st := crm.state()
	h := st.HA
	for _, n := range st.Nodes {
		old := h.NodeState[n.Name]
		want := "unknown"
		if n.Online {
			want = "online"
		}
		if old == want || (old == "fence" && !n.Online) {
			continue
		}
		h.NodeState[n.Name] = want
		if old != "" {
			crm.logLocked("info", "node '%s': state changed from '%s' => '%s'", n.Name, old, want)
		}
	}
}

// crmSyncServicesLocked adds the configured resources the manager does
// not know yet and drops the ones gone or ignored.
func (crm *haCRM) crmSyncServicesLocked() {
	st := crm.state()
	h := st.HA
	for _, sid := range slices.Sorted(maps.Keys(h.Resources)) {
		r := h.Resources[sid]
		if h.Services[sid] != nil || r.requested() == "ignored" {
			continue
		}
		g := st.haGuest(sid)
		if g == nil {
			continue // "not found": nothing to manage until the guest exists
		}
		crm.logLocked("info", "adding new service '%s' on node '%s'", sid, g.haNode())
		state := "request_stop"
		if r.requested() == "started" {
			state = "request_start"
		}
		h.Services[sid] = &HAService{Node: g.haNode(), State: state}
	}
	for _, sid := range slices.Sorted(maps.Keys(h.Services)) {
		r := h.Resources[sid]
		if r != nil && r.requested() != "ignored" {
			continue
		}
		reason := "no config"
		if r != nil {
			reason = "ignored state requested"
		}
		crm.logLocked("info", "removing stale service '%s' (%s)", sid, reason)
		delete(h.Services, sid)
	}
}

// setServiceStateLocked is Manager.pm's change_service_state: the new
// state, the LRM's work and counters reset, and its log line.
func (crm *haCRM) setServiceStateLocked(sid, state string, node string) {
	st := crm.state()
	s := st.HA.Services[sid]
	old := s.State
	s.State, s.Running, s.Restarts, s.UPID, s.UPIDNode = state, false, 0, "", ""
	text := ""
	if node != "" {
		s.Node = node
		text = "  (node = " + node + ")"
	}
	if state != "migrate" && state != "relocate" {
		s.Target = ""
	} else {
		text = "  (node = " + s.Node + ", target = " + s.Target + ")"
	}
	crm.logLocked("info", "service '%s': state changed from '%s' to '%s'%s", sid, old, state, text)
}

// crmCommandsLocked runs the queued migrate and relocate commands.
func (crm *haCRM) crmCommandsLocked() {
	st := crm.state()
	h := st.HA
	cmds := h.Commands
	h.Commands = nil
	for _, cmd := range cmds {
		f := strings.Fields(cmd)
		if len(f) != 3 {
			crm.logLocked("err", "unable to parse crm command: %s", cmd)
			continue
		}
		op, sid, target := f[0], f[1], f[2]
		crm.logLocked("info", "got crm command: %s", cmd)
		s := h.Services[sid]
		switch n := st.node(target); {
		case s == nil:
			crm.logLocked("err", "crm command error - no such service: %s", cmd)
		case n == nil || !n.Online:
			crm.logLocked("err", "crm command error - node not online: %s", cmd)
		case s.Node == target:
			crm.logLocked("info", "ignore crm command - service already on target node: %s", cmd)
		case s.State != "started" && s.State != "stopped" && s.State != "request_stop":
			crm.logLocked("err", "crm command '%s' error - service not in started or stopped state", cmd)
		default:
			// A CT cannot live-migrate: HA always relocates it
			// (Resources/PVECT.pm migrate).
			crm.logLocked("info", "%s service '%s' to node '%s'", op, sid, target)
			s.Target = target
			crm.setServiceStateLocked(sid, "relocate", "")
		}
	}
}
