package sim

import "github.com/corralhq/corral/internal/sim/model"

// HA routes (pve-ha-manager PVE/API2/HA/Resources.pm, Groups.pm,
// Rules.pm, Status.pm). Reads need Sys.Audit on /, writes Sys.Console
// on / (the schema's checks, made before a handler runs). PVE 8.4 has
// groups and no rules; 9.x has rules, and its group routes refuse with
// "ha groups have been migrated to rules".

// haAPI serves /cluster/ha.
type haAPI struct {
	cluster *model.Cluster
}

func (a *haAPI) register(route routeFunc) {
	route("GET", "/cluster/ha", a.getIndex)
	route("GET", "/cluster/ha/resources", a.getResources)
	route("POST", "/cluster/ha/resources", a.postResource)
	route("GET", "/cluster/ha/resources/{sid}", a.getResource)
	route("PUT", "/cluster/ha/resources/{sid}", a.putResource)
	route("DELETE", "/cluster/ha/resources/{sid}", a.deleteResource)
	route("POST", "/cluster/ha/resources/{sid}/migrate", a.motion(false))
	route("POST", "/cluster/ha/resources/{sid}/relocate", a.motion(true))
	route("GET", "/cluster/ha/groups", a.getGroups)
	route("POST", "/cluster/ha/groups", a.setGroup(true))
	route("GET", "/cluster/ha/groups/{group}", a.getGroup)
	route("PUT", "/cluster/ha/groups/{group}", a.setGroup(false))
	route("DELETE", "/cluster/ha/groups/{group}", a.deleteGroup)
	if a.cluster.Version() != "8.4" {
		route("GET", "/cluster/ha/rules", a.getRules)
		route("POST", "/cluster/ha/rules", a.setRule(true))
		route("GET", "/cluster/ha/rules/{rule}", a.getRule)
		route("PUT", "/cluster/ha/rules/{rule}", a.setRule(false))
		route("DELETE", "/cluster/ha/rules/{rule}", a.deleteRule)
	}
	route("GET", "/cluster/ha/status", a.getStatusIndex)
	route("GET", "/cluster/ha/status/current", a.getStatus)
	route("GET", "/cluster/ha/status/manager_status", a.getManagerStatus)
}

// getIndex is the /cluster/ha directory.
func (a *haAPI) getIndex(r *request) (any, error) {
	ids := []string{"resources", "groups", "status"}
	if a.cluster.Version() != "8.4" {
		ids = append(ids, "rules")
	}
	out := []map[string]string{}
	for _, id := range ids {
		out = append(out, map[string]string{"id": id})
	}
	return out, nil
}

func (a *haAPI) getResources(r *request) (any, error) {
	return a.cluster.HAResources(r.params["type"]), nil
}

func (a *haAPI) getResource(r *request) (any, error) {
	return a.cluster.HAResource(r.params["sid"])
}

func (a *haAPI) postResource(r *request) (any, error) {
	return nil, a.cluster.AddHAResource(r.params)
}

func (a *haAPI) putResource(r *request) (any, error) {
	return nil, a.cluster.UpdateHAResource(r.params, splitList(r.params["delete"]), r.params["digest"])
}

// deleteResource: purge defaults to on (9.x; 8.4 has no purge and never
// touches rules, of which it has none).
func (a *haAPI) deleteResource(r *request) (any, error) {
	purge := true
	if _, ok := r.params["purge"]; ok {
		purge = boolParam(r, "purge")
	}
	return nil, a.cluster.DeleteHAResource(r.params["sid"], purge)
}

func (a *haAPI) motion(relocate bool) handler {
	return func(r *request) (any, error) {
		m, err := a.cluster.RequestHAMotion(r.params["sid"], r.params["node"], relocate)
		if err != nil {
			return nil, err
		}
		if a.cluster.Version() == "8.4" {
			return nil, nil // 8.4's migrate and relocate return null
		}
		return m, nil
	}
}

func (a *haAPI) getGroups(r *request) (any, error) { return a.cluster.HAGroups() }

func (a *haAPI) getGroup(r *request) (any, error) { return a.cluster.HAGroup(r.params["group"]) }

func (a *haAPI) setGroup(create bool) handler {
	return func(r *request) (any, error) {
		return nil, a.cluster.SetHAGroup(create, r.params, splitList(r.params["delete"]))
	}
}

func (a *haAPI) deleteGroup(r *request) (any, error) {
	return nil, a.cluster.DeleteHAGroup(r.params["group"])
}

func (a *haAPI) getRules(r *request) (any, error) {
	return a.cluster.HARules(r.params["type"], r.params["resource"]), nil
}

func (a *haAPI) getRule(r *request) (any, error) { return a.cluster.HARule(r.params["rule"]) }

func (a *haAPI) setRule(create bool) handler {
	return func(r *request) (any, error) {
		return nil, a.cluster.SetHARule(create, r.params, splitList(r.params["delete"]), r.params["digest"])
	}
}

func (a *haAPI) deleteRule(r *request) (any, error) {
	return nil, a.cluster.DeleteHARule(r.params["rule"])
}

// getStatusIndex is the /cluster/ha/status directory.
func (a *haAPI) getStatusIndex(r *request) (any, error) {
	return []map[string]string{{"name": "current"}, {"name": "manager_status"}}, nil
}

// getStatus answers as the first online node would (the emulator has
// one endpoint for the whole cluster).
func (a *haAPI) getStatus(r *request) (any, error) {
	return a.cluster.HAStatus(a.cluster.AnsweringNode()), nil
}

func (a *haAPI) getManagerStatus(r *request) (any, error) {
	return a.cluster.HAManagerStatus(), nil
}
