package model

import (
	"maps"
	"slices"
)

// HA groups (PVE 8, pve-ha-manager API2/HA/Groups.pm): the nodes a
// resource prefers, or with restricted the only ones it may run on.
// PVE 9 migrated them to rules (ha_rules.go), and answers every group
// call but DELETE with an error. The CRM reads them through
// haRules.haAllowedNodesLocked.

// haGroups answers for groups.cfg. Besides haParts it holds the
// emulated release.
type haGroups struct {
	haParts
	version string
}

// HAGroupEntry is one group as GET /cluster/ha/groups returns it (8.4).
type HAGroupEntry struct {
	Comment    string `json:"comment,omitempty"`
	Digest     string `json:"digest"`
	Group      string `json:"group"`
	NoFailback int    `json:"nofailback,omitempty"`
	Nodes      string `json:"nodes"`
	Restricted int    `json:"restricted,omitempty"`
	Type       string `json:"type"`
}

// errGroupsMigrated is 9.x's answer to every group call but DELETE's
// (have_groups_been_migrated: the groups are gone into rules).
func (gr *haGroups) errGroupsMigrated(what string) error {
	if gr.version == "8.4" {
		return nil
	}
	return Failf("cannot %s: ha groups have been migrated to rules\n", what)
}

// HAGroups is GET /cluster/ha/groups.
func (gr *haGroups) HAGroups() ([]HAGroupEntry, error) {
	if err := gr.errGroupsMigrated("index groups"); err != nil {
		return nil, err
	}
	gr.stateMu.RLock()
	defer gr.stateMu.RUnlock()
	st := gr.state()
	out := []HAGroupEntry{}
	if st.HA == nil {
		return out, nil
	}
	for _, id := range slices.Sorted(maps.Keys(st.HA.Groups)) {
		out = append(out, gr.groupEntryLocked(id))
	}
	return out, nil
}

func (gr *haGroups) groupEntryLocked(id string) HAGroupEntry {
	st := gr.state()
	g := st.HA.Groups[id]
	return HAGroupEntry{Group: id, Type: "group", Nodes: g.Nodes, Restricted: b01(g.Restricted), NoFailback: b01(g.NoFailback),
		Comment: g.Comment, Digest: haDigest(st.HA.Groups)}
}

// HAGroup is GET /cluster/ha/groups/{group}.
func (gr *haGroups) HAGroup(id string) (HAGroupEntry, error) {
	if err := gr.errGroupsMigrated("read group"); err != nil {
		return HAGroupEntry{}, err
	}
	gr.stateMu.RLock()
	defer gr.stateMu.RUnlock()
	st := gr.state()
	if st.HA == nil || st.HA.Groups[id] == nil {
		return HAGroupEntry{}, Failf("no such ha group '%s'\n", id)
	}
	return gr.groupEntryLocked(id), nil
}

// SetHAGroup is POST (create) and PUT /cluster/ha/groups[/{group}].
func (gr *haGroups) SetHAGroup(create bool, params map[string]string, del []string) error {
	what := "update group"
	if create {
		what = "create group"
	}
	if err := gr.errGroupsMigrated(what); err != nil {
		return err
	}
	gr.stateMu.Lock()
	defer gr.stateMu.Unlock()
	h := gr.state().haConfig()
	if h.Groups == nil {
		h.Groups = map[string]*HAGroup{}
	}
	id := params["group"]
	g := h.Groups[id]
	switch {
	case create && g != nil:
		return Failf("create ha group failed: ha group ID '%s' already defined\n", id)
	case create:
		g = &HAGroup{}
	case g == nil:
		return Failf("update ha group failed: no such ha group '%s'\n", id)
	}
	next := *g
	if v, ok := params["nodes"]; ok {
		next.Nodes = v
	}
	if v, ok := params["restricted"]; ok {
		next.Restricted = isTrue(v)
	}
	if v, ok := params["nofailback"]; ok {
		next.NoFailback = isTrue(v)
	}
	if v, ok := params["comment"]; ok {
		next.Comment = v
	}
	for _, k := range del {
		switch k {
		case "restricted":
			next.Restricted = false
		case "nofailback":
			next.NoFailback = false
		case "comment":
			next.Comment = ""
		}
	}
	h.Groups[id] = &next
	return gr.changedLocked()
}

// DeleteHAGroup is DELETE /cluster/ha/groups/{group}.
func (gr *haGroups) DeleteHAGroup(id string) error {
	gr.stateMu.Lock()
	defer gr.stateMu.Unlock()
	st := gr.state()
	if st.HA == nil || st.HA.Groups[id] == nil {
		return Failf("delete ha group failed: no such ha group '%s'\n", id)
	}
	for sid, r := range st.HA.Resources {
		if r.Group == id {
			return Failf("delete ha group failed: ha group '%s' is used by %s\n", id, sid)
		}
	}
	delete(st.HA.Groups, id)
	gr.journal.markCore()
	return gr.journal.saveLocked()
}
