package model

import (
	"maps"
	"slices"
	"time"
)

// GET /cluster/ha/status/current and manager_status (API2/HA/Status.pm):
// the CRM's and LRMs' view, built from the HA state. The emulator's CRM
// master is the first online node, its timestamp the last round.

// haStatusView answers the HA status reads; it changes nothing.
type haStatusView struct{ haParts }

// HAStatusEntry is one entry of GET /cluster/ha/status/current; which
// fields are set depends on Type (quorum, master, fencing, lrm, service).
type HAStatusEntry struct {
	ArmedState   string `json:"armed-state,omitempty"`
	Comment      string `json:"comment,omitempty"`
	CRMState     string `json:"crm_state,omitempty"`
	Failback     *int   `json:"failback,omitempty"`
	Group        string `json:"group,omitempty"`
	ID           string `json:"id"`
	MaxRelocate  *int   `json:"max_relocate,omitempty"`
	MaxRestart   *int   `json:"max_restart,omitempty"`
	Node         string `json:"node"`
	Quorate      *int   `json:"quorate,omitempty"`
	RequestState string `json:"request_state,omitempty"`
	SID          string `json:"sid,omitempty"`
	State        string `json:"state,omitempty"`
	Status       string `json:"status"`
	Timestamp    int64  `json:"timestamp,omitempty"`
	Type         string `json:"type"`
}

// HAStatus is GET /cluster/ha/status/current as node answers it.
func (sv *haStatusView) HAStatus(node string) []HAStatusEntry {
	sv.stateMu.RLock()
	defer sv.stateMu.RUnlock()
	st := sv.state()
	one := 1
	out := []HAStatusEntry{{ID: "quorum", Type: "quorum", Node: node, Status: "OK", Quorate: &one}}
	h := st.HA
	master := ""
	for _, n := range st.Nodes {
		if n.Online {
			master = n.Name
			break
		}
	}
	active := h != nil && (len(h.Resources) > 0 || len(h.Services) > 0)
	now := sv.clock()
	if active && master != "" {
		out = append(out, HAStatusEntry{ID: "master", Type: "master", Node: master, Timestamp: now.Unix(),
			Status: master + " (active, " + now.Format(time.ANSIC) + ")"})
		out = append(out, HAStatusEntry{ID: "fencing", Type: "fencing", Node: master, ArmedState: "armed", Status: "armed (CRM watchdog active)"})
	} else {
		out = append(out, HAStatusEntry{ID: "fencing", Type: "fencing", Node: node, ArmedState: "standby", Status: "standby (CRM watchdog standby)"})
	}
	if !active {
		return out
	}
	out = append(out, sv.lrmEntriesLocked(now)...)
	for _, sid := range slices.Sorted(maps.Keys(h.Services)) {
		out = append(out, sv.serviceEntryLocked(sid))
	}
	for _, sid := range slices.Sorted(maps.Keys(h.Resources)) {
		if h.Services[sid] == nil {
			out = append(out, sv.serviceEntryLocked(sid))
		}
	}
	return out
}

// lrmEntriesLocked are the lrm:<node> entries: active on a node with
// services, idle on an online one without, old timestamp on a dead one.
func (sv *haStatusView) lrmEntriesLocked(now time.Time) []HAStatusEntry {
	st := sv.state()
	var out []HAStatusEntry
	for _, n := range st.Nodes {
		e := HAStatusEntry{ID: "lrm:" + n.Name, Type: "lrm", Node: n.Name, Timestamp: now.Unix()}
		state, wd := "idle", "watchdog standby"
		for _, s := range st.HA.Services {
			if s.Node == n.Name {
				state, wd = "active", "watchdog active"
			}
		}
		if !n.Online {
			e.Timestamp = n.OfflineSince
			state, wd = "old timestamp - dead?", "watchdog standby"
		}
		e.Status = n.Name + " (" + state + ", " + wd + ", " + time.Unix(e.Timestamp, 0).Format(time.ANSIC) + ")"
		out = append(out, e)
	}
	return out
}

// serviceEntryLocked is Status.pm's add_service for sid.
func (sv *haStatusView) serviceEntryLocked(sid string) HAStatusEntry {
	st := sv.state()
	h := st.HA
	e := HAStatusEntry{ID: "service:" + sid, Type: "service", SID: sid}
	s, r := h.Services[sid], h.Resources[sid]
	if s != nil {
		e.Node, e.CRMState = s.Node, s.State
	} else if g := st.haGuest(sid); g != nil {
		e.Node = g.haNode()
	}
	e.State = verboseServiceState(s, r, st.haGuest(sid) != nil)
	node := e.Node
	if node == "" {
		node = "---"
	}
	e.Status = sid + " (" + node + ", " + e.State + ")"
	if r != nil {
		e.RequestState = r.requested()
		e.Group, e.Comment, e.MaxRestart, e.MaxRelocate = r.Group, r.Comment, r.MaxRestart, r.MaxRelocate
		if r.Failback != nil {
			f := b01(*r.Failback)
			e.Failback = &f
		}
	}
	return e
}

// verboseServiceState is PVE::HA::Tools::get_verbose_service_state.
func verboseServiceState(s *HAService, r *HAResource, exists bool) string {
	switch {
	case r == nil:
		return "deleting"
	case r.requested() == "ignored":
		return "ignored"
	case !exists:
		return "not found"
	case s == nil || s.State == "":
		return "queued"
	}
	req := r.requested()
	switch s.State {
	case "stopped":
		if req == "started" {
			return "starting"
		}
		if req == "disabled" {
			return "disabled"
		}
	case "started":
		if !s.Running {
			return "starting"
		}
		if req == "stopped" || req == "disabled" {
			return "stopping"
		}
	case "error":
		if req == "disabled" {
			return "clearing error flag"
		}
	}
	return s.State
}

// HAManagerStatus is GET /cluster/ha/status/manager_status: the CRM's
// manager_status (master, node and service status) and its log.
type HAManagerStatus struct {
	ManagerStatus map[string]any `json:"manager_status"`
}

// HAManagerStatus answers manager_status.
func (sv *haStatusView) HAManagerStatus() HAManagerStatus {
	sv.stateMu.RLock()
	defer sv.stateMu.RUnlock()
	st := sv.state()
	ms := map[string]any{}
	if h := st.HA; h != nil {
		ss := map[string]any{}
		for sid, s := range h.Services {
			e := map[string]any{"node": s.Node, "state": s.State}
			if s.Running {
				e["running"] = 1
			}
			if len(s.FailedNodes) > 0 {
				e["failed_nodes"] = s.FailedNodes
			}
			if s.Target != "" {
				e["target"] = s.Target
			}
			ss[sid] = e
		}
		ms["service_status"] = ss
		ms["node_status"] = maps.Clone(h.NodeState)
		ms["timestamp"] = sv.clock().Unix()
		for _, n := range st.Nodes {
			if n.Online {
				ms["master_node"] = n.Name
				break
			}
		}
	}
	return HAManagerStatus{ManagerStatus: ms}
}

// HALog is the CRM's recent log lines, oldest first (for tests and the
// emulator's users: what pve-ha-crm would have written to syslog).
func (sv *haStatusView) HALog() []string {
	sv.stateMu.RLock()
	defer sv.stateMu.RUnlock()
	st := sv.state()
	if st.HA == nil {
		return nil
	}
	return slices.Clone(st.HA.Log)
}

// AnsweringNode is the node that answers a cluster-wide read: the first
// online node (the first node when none is).
func (sv *haStatusView) AnsweringNode() string {
	sv.stateMu.RLock()
	defer sv.stateMu.RUnlock()
	st := sv.state()
	for _, n := range st.Nodes {
		if n.Online {
			return n.Name
		}
	}
	return st.Nodes[0].Name
}
