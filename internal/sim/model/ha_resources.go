package model

import (
	"maps"
	"slices"
	"strconv"
)

// The /cluster/ha/resources routes (pve-ha-manager API2/HA/Resources.pm).
// Sys.Audit (reads) and Sys.Console (writes) on / are the schema's
// checks, made by the HTTP layer. A write queues nothing: the CRM loop
// (ha_crm.go) picks the change up on its next round, as pve-ha-crm
// reads resources.cfg every cycle.

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

func (c *Cluster) haEntryLocked(sid string, r *HAResource) HAResourceEntry {
	e := HAResourceEntry{SID: sid, Type: "ct", State: r.State, Group: r.Group, Comment: r.Comment,
		MaxRestart: r.MaxRestart, MaxRelocate: r.MaxRelocate, Digest: haDigest(c.st.HA.Resources)}
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
func (c *Cluster) HAResources(typ string) []HAResourceEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := []HAResourceEntry{}
	if c.st.HA == nil || (typ != "" && typ != "ct") {
		return out
	}
	for _, sid := range slices.Sorted(maps.Keys(c.st.HA.Resources)) {
		out = append(out, c.haEntryLocked(sid, c.st.HA.Resources[sid]))
	}
	return out
}

// HAResource is GET /cluster/ha/resources/{sid}.
func (c *Cluster) HAResource(sid string) (HAResourceEntry, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	sid, _, err := c.st.parseHASID(sid)
	if err != nil {
		return HAResourceEntry{}, err
	}
	if c.st.HA == nil || c.st.HA.Resources[sid] == nil {
		return HAResourceEntry{}, Failf("no such resource '%s'\n", sid)
	}
	return c.haEntryLocked(sid, c.st.HA.Resources[sid]), nil
}

// AddHAResource is POST /cluster/ha/resources. params: sid, type, state,
// group (8.4), failback (9.x), max_restart, max_relocate, comment.
func (c *Cluster) AddHAResource(params map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sid, vmid, err := c.st.parseHASID(params["sid"])
	if err != nil {
		return err
	}
	if t := params["type"]; t != "" && t != "ct" {
		return Failf("types does not match\n")
	}
	if err := c.checkHAGroupParamLocked(params); err != nil {
		return err
	}
	if c.st.Guests[vmid] == nil {
		return Failf("resource '%s' does not exist in cluster\n", sid)
	}
	h := c.haLocked()
	if h.Resources[sid] != nil {
		return Failf("create resource failed: resource ID '%s' already defined\n", sid)
	}
	r := &HAResource{}
	if err := applyHAParams(r, params, nil); err != nil {
		return err
	}
	h.Resources[sid] = r
	c.markCore()
	c.kickCRM()
	return c.saveLocked()
}

// checkHAGroupParamLocked refuses group on 9.x, where groups have been
// migrated to rules, and an unknown group on 8.4.
func (c *Cluster) checkHAGroupParamLocked(params map[string]string) error {
	g, ok := params["group"]
	if !ok {
		return nil
	}
	if c.opts.Version != "8.4" {
		return Failf("invalid parameter 'group': ha groups have been migrated to rules\n")
	}
	if g != "" && (c.st.HA == nil || c.st.HA.Groups[g] == nil) {
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
func (c *Cluster) UpdateHAResource(params map[string]string, del []string, digest string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sid, _, err := c.st.parseHASID(params["sid"])
	if err != nil {
		return err
	}
	if t := params["type"]; t != "" && t != "ct" {
		return Failf("types does not match\n")
	}
	if err := c.checkHAGroupParamLocked(params); err != nil {
		return err
	}
	if err := c.checkHAServiceStateLocked(sid, params["state"]); err != nil {
		return err
	}
	h := c.haLocked()
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
	c.markCore()
	c.kickCRM()
	return c.saveLocked()
}

// checkHAServiceStateLocked is check_service_state: a managed service in
// error state refuses every request but state=disabled.
func (c *Cluster) checkHAServiceStateLocked(sid, req string) error {
	if c.st.HA == nil || c.st.HA.Resources[sid] == nil || c.st.HA.Resources[sid].requested() == "ignored" {
		return nil
	}
	if s := c.st.HA.Services[sid]; s != nil && s.State == "error" && req != "disabled" {
		return Failf("service '%s' in error state, must be disabled and fixed first\n", sid)
	}
	return nil
}

// DeleteHAResource is DELETE /cluster/ha/resources/{sid}. purge (default
// on, 9.x) also drops the resource from the rules that name it, and a
// rule left with no resource.
func (c *Cluster) DeleteHAResource(sid string, purge bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	sid, _, err := c.st.parseHASID(sid)
	if err != nil {
		return err
	}
	if c.st.HA == nil || c.st.HA.Resources[sid] == nil {
		return Failf("cannot delete service '%s', not HA managed!\n", sid)
	}
	h := c.st.HA
	delete(h.Resources, sid)
	if purge {
		c.purgeHARulesLocked(sid)
	}
	c.markCore()
	c.kickCRM()
	return c.saveLocked()
}

// HAMotion is the answer of POST …/{sid}/migrate and …/relocate.
type HAMotion struct {
	SID           string `json:"sid"`
	RequestedNode string `json:"requested-node"`
}

// RequestHAMotion queues a CRM migrate (relocate when relocate is set)
// of sid to node: Resources.pm migrate/relocate.
func (c *Cluster) RequestHAMotion(sid, node string, relocate bool) (HAMotion, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sid, _, err := c.st.parseHASID(sid)
	if err != nil {
		return HAMotion{}, err
	}
	if err := c.queueHAMotionLocked(sid, node, relocate); err != nil {
		return HAMotion{}, err
	}
	c.markCore()
	c.kickCRM()
	return HAMotion{SID: sid, RequestedNode: node}, c.saveLocked()
}

func (c *Cluster) queueHAMotionLocked(sid, node string, relocate bool) error {
	if c.st.HA == nil || c.st.HA.Resources[sid] == nil || c.st.HA.Resources[sid].requested() == "ignored" {
		return Failf("resource '%s' is not HA managed\n", sid)
	}
	if err := c.checkHAServiceStateLocked(sid, ""); err != nil {
		return err
	}
	cmd := "migrate"
	if relocate {
		cmd = "relocate"
	}
	h := c.haLocked()
	h.Commands = append(h.Commands, cmd+" "+sid+" "+node)
	return nil
}
