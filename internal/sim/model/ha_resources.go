package model

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The /cluster/ha/resources routes (pve-ha-manager API2/HA/Resources.pm).
// Sys.Audit (reads) and Sys.Console (writes) on / are the schema's
// checks, made by the HTTP layer. A write queues nothing: the CRM loop
// (ha_crm.go) picks the change up on its next round, as pve-ha-crm
// reads resources.cfg every cycle.

// haResources answers for resources.cfg. Besides haParts it holds the
// emulated release (8.4 has groups) and the rules, which a purge
// updates.
type haResources struct {
	haParts
	version string
	rules   interface{ purgeHARulesLocked(sid string) }
}

// HAResourceEntry is one resource as GET returns it: the section's set
// keys (PVE applies no defaults here), the sid, its type and the
// config's digest.
type HAResourceEntry struct {
	Comment     string `json:"comment,omitempty"`
	Digest      string `json:"digest"`
	Failback    *int   `json:"failback,omitempty"`
	Group       string `json:"group,omitempty"`
	MaxRelocate *int   `json:"max_relocate,omitempty"`
	MaxRestart  *int   `json:"max_restart,omitempty"`
	SID         string `json:"sid"`
	State       string `json:"state,omitempty"`
	Type        string `json:"type"`
}

func (rs *haResources) haEntryLocked(sid string, r *HAResource) HAResourceEntry {
	st := rs.state()
	typ, _, _ := strings.Cut(sid, ":")
	e := HAResourceEntry{SID: sid, Type: typ, State: r.State, Group: r.Group, Comment: r.Comment,
		MaxRestart: r.MaxRestart, MaxRelocate: r.MaxRelocate, Digest: haDigest(st.HA.Resources)}
	if r.Failback != nil {
		f := 0
		if *r.Failback {
			f = 1
		}
		e.Failback = &f
	}
	return e
}

// HAResources is GET /cluster/ha/resources: every resource (of type typ
// when set), by sid.
func (rs *haResources) HAResources(typ string) []HAResourceEntry {
	rs.stateMu.RLock()
	defer rs.stateMu.RUnlock()
	st := rs.state()
	out := []HAResourceEntry{}
	if st.HA == nil {
		return out
	}
	for _, sid := range slices.Sorted(maps.Keys(st.HA.Resources)) {
		if typ != "" && !strings.HasPrefix(sid, typ+":") {
			continue
		}
		out = append(out, rs.haEntryLocked(sid, st.HA.Resources[sid]))
	}
	return out
}

// HAResource is GET /cluster/ha/resources/{sid}.
func (rs *haResources) HAResource(sid string) (HAResourceEntry, error) {
	rs.stateMu.RLock()
	defer rs.stateMu.RUnlock()
	st := rs.state()
	sid, _, err := st.parseHASID(sid)
	if err != nil {
		return HAResourceEntry{}, err
	}
	if st.HA == nil || st.HA.Resources[sid] == nil {
		return HAResourceEntry{}, Failf("no such resource '%s'\n", sid)
	}
	return rs.haEntryLocked(sid, st.HA.Resources[sid]), nil
}

// AddHAResource is POST /cluster/ha/resources. params: sid, type, state,
// group (8.4), failback (9.x), max_restart, max_relocate, comment.
func (rs *haResources) AddHAResource(params map[string]string) error {
	rs.stateMu.Lock()
	defer rs.stateMu.Unlock()
	st := rs.state()
	sid, _, err := rs.checkHAResourceParamsLocked(params)
	if err != nil {
		return err
	}
	if st.haGuest(sid) == nil {
		return Failf("resource '%s' does not exist in cluster\n", sid)
	}
	h := rs.state().haConfig()
	if h.Resources[sid] != nil {
		return Failf("create resource failed: resource ID '%s' already defined\n", sid)
	}
	r := &HAResource{}
	if err := applyHAParams(r, params, nil); err != nil {
		return err
	}
	h.Resources[sid] = r
	return rs.changedLocked()
}

// checkHAResourceParamsLocked is what POST and PUT check first, alike:
// the sid parses (as sid and vmid), the type if given is the sid's, and
// the group is one this release takes (checkHAGroupParamLocked).
func (rs *haResources) checkHAResourceParamsLocked(params map[string]string) (sid string, vmid int, err error) {
	st := rs.state()
	sid, vmid, err = st.parseHASID(params["sid"])
	if err != nil {
		return "", 0, err
	}
	if t := params["type"]; t != "" && !strings.HasPrefix(sid, t+":") {
		return "", 0, Failf("types does not match\n")
	}
	if err := rs.checkHAGroupParamLocked(params); err != nil {
		return "", 0, err
	}
	return sid, vmid, nil
}

// checkHAGroupParamLocked refuses group on 9.x, where groups have been
// migrated to rules, and an unknown group on 8.4.
func (rs *haResources) checkHAGroupParamLocked(params map[string]string) error {
	st := rs.state()
	g, ok := params["group"]
	if !ok {
		return nil
	}
	if rs.version != "8.4" {
		return Failf("invalid parameter 'group': ha groups have been migrated to rules\n")
	}
	if g != "" && (st.HA == nil || st.HA.Groups[g] == nil) {
		return Failf("HA group '%s' does not exist\n", g)
	}
	return nil
}

// applyHAParams sets r's fields from params, then clears the ones
// delete names.
func applyHAParams(r *HAResource, params map[string]string, del []string) error {
	for k, v := range params {
		switch k {
		case "state":
			r.State = v
		case "group":
			r.Group = v
		case "comment":
			r.Comment = v
		case "failback":
			b := isTrue(v)
			r.Failback = &b
		case "max_restart", "max_relocate":
			n, err := strconv.Atoi(v)
			if err != nil {
				return ParamError(map[string]string{k: "type check ('integer') failed - got '" + v + "'"})
			}
			if k == "max_restart" {
				r.MaxRestart = &n
			} else {
				r.MaxRelocate = &n
			}
		}
	}
	for _, k := range del {
		switch k {
		case "state":
			r.State = ""
		case "group":
			r.Group = ""
		case "comment":
			r.Comment = ""
		case "failback":
			r.Failback = nil
		case "max_restart":
			r.MaxRestart = nil
		case "max_relocate":
			r.MaxRelocate = nil
		}
	}
	return nil
}

// UpdateHAResource is PUT /cluster/ha/resources/{sid}. A service in
// error state takes only state=disabled (check_service_state).
func (rs *haResources) UpdateHAResource(params map[string]string, del []string, digest string) error {
	rs.stateMu.Lock()
	defer rs.stateMu.Unlock()
	sid, _, err := rs.checkHAResourceParamsLocked(params)
	if err != nil {
		return err
	}
	if err := rs.checkHAServiceStateLocked(sid, params["state"]); err != nil {
		return err
	}
	h := rs.state().haConfig()
	if digest != "" && digest != haDigest(h.Resources) {
		return Failf("update resources config failed: detected modified configuration - file changed by other user? Try again.\n")
	}
	r := h.Resources[sid]
	if r == nil {
		return Failf("update resources config failed: service '%s' is not HA managed\n", sid)
	}
	if err := applyHAParams(r, params, del); err != nil {
		return err
	}
	return rs.changedLocked()
}

// checkHAServiceStateLocked is check_service_state: a managed service in
// error state refuses every request but state=disabled.
func (rs *haResources) checkHAServiceStateLocked(sid, req string) error {
	st := rs.state()
	if st.HA == nil || st.HA.Resources[sid] == nil || st.HA.Resources[sid].requested() == "ignored" {
		return nil
	}
	if s := st.HA.Services[sid]; s != nil && s.State == "error" && req != "disabled" {
		return Failf("service '%s' in error state, must be disabled and fixed first\n", sid)
	}
	return nil
}

// DeleteHAResource is DELETE /cluster/ha/resources/{sid}. purge (default
// on, 9.x) also drops the resource from the rules that name it, and a
// rule left with no resource.
func (rs *haResources) DeleteHAResource(sid string, purge bool) error {
	rs.stateMu.Lock()
	defer rs.stateMu.Unlock()
	st := rs.state()
	sid, _, err := st.parseHASID(sid)
	if err != nil {
		return err
	}
	if st.HA == nil || st.HA.Resources[sid] == nil {
		return Failf("cannot delete service '%s', not HA managed!\n", sid)
	}
	h := st.HA
	delete(h.Resources, sid)
	if purge {
		rs.rules.purgeHARulesLocked(sid)
	}
	return rs.changedLocked()
}

// HAMotion is the answer of POST …/{sid}/migrate and …/relocate.
type HAMotion struct {
	SID           string `json:"sid"`
	RequestedNode string `json:"requested-node"`
}

// RequestHAMotion queues a CRM migrate (relocate when relocate is set)
// of sid to node: Resources.pm migrate/relocate.
func (rs *haResources) RequestHAMotion(sid, node string, relocate bool) (HAMotion, error) {
	rs.stateMu.Lock()
	defer rs.stateMu.Unlock()
	st := rs.state()
	sid, _, err := st.parseHASID(sid)
	if err != nil {
		return HAMotion{}, err
	}
	if err := rs.queueHAMotionLocked(sid, node, relocate); err != nil {
		return HAMotion{}, err
	}
	rs.journal.markCore()
	rs.crm.kickCRM()
	return HAMotion{SID: sid, RequestedNode: node}, rs.journal.saveLocked()
}

func (rs *haResources) queueHAMotionLocked(sid, node string, relocate bool) error {
	st := rs.state()
	if st.HA == nil || st.HA.Resources[sid] == nil || st.HA.Resources[sid].requested() == "ignored" {
		return Failf("resource '%s' is not HA managed\n", sid)
	}
	if err := rs.checkHAServiceStateLocked(sid, ""); err != nil {
		return err
	}
	cmd := "migrate"
	if relocate {
		cmd = "relocate"
	}
	h := rs.state().haConfig()
	h.Commands = append(h.Commands, cmd+" "+sid+" "+node)
	return nil
}
