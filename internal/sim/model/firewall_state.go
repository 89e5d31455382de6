package model

// Where the State keeps the firewall config: the cluster's
// (ClusterFirewall: cluster.fw, the security groups, the nodes' host.fw)
// and each guest's (Firewall by VMID). The firewall's parts (fwConfig,
// fwAliases, fwIPSets, fwRules, fwGroups) each find their share of it
// here, with the State's lock held; a read never makes a config that is
// not there, a change makes it first.

// fwParts are the fields every firewall part holds, embedded: the
// State's lock and the State, the route's node check and the journal,
// wired once (wireFirewall). It holds no *Cluster
// (TestParts_reachNoCluster looks inside it).
type fwParts struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	// nodes checks a route's node: a guest's and a node's config need
	// only the node to exist (load_vmfw_conf reads a file that may not
	// be there).
	nodes   interface{ checkNodeLocked(node string) error }
	journal coreJournal
}

// saveLocked marks the config files changed and saves the State.
func (fp fwParts) saveLocked() error {
	fp.journal.markCore()
	return fp.journal.saveLocked()
}

// scopeLocked checks a guest scope's node (the route proxies to it);
// the cluster's scope needs none.
func (fp fwParts) scopeLocked(s AliasScope) error {
	if s.VMID == 0 {
		return nil
	}
	return fp.nodes.checkNodeLocked(s.Node)
}

// guestFirewall is the guest's firewall config, made empty if there is
// none.
func (st *State) guestFirewall(vmid int) *GuestFirewall {
	if st.Firewall == nil {
		st.Firewall = map[int]*GuestFirewall{}
	}
	if st.Firewall[vmid] == nil {
		st.Firewall[vmid] = &GuestFirewall{}
	}
	return st.Firewall[vmid]
}

// clusterFirewall is the cluster's firewall config, made empty if there
// is none.
func (st *State) clusterFirewall() *ClusterFirewall {
	if st.ClusterFirewall == nil {
		st.ClusterFirewall = &ClusterFirewall{}
	}
	return st.ClusterFirewall
}

// clusterFirewallView is the cluster's firewall config to read: an
// empty one when there is none, which is not stored.
func (st *State) clusterFirewallView() *ClusterFirewall {
	if cf := st.ClusterFirewall; cf != nil {
		return cf
	}
	return &ClusterFirewall{}
}

// fwAliases returns the scope's aliases, made when create is set.
func (st *State) fwAliases(s AliasScope, create bool) map[string]*FirewallAlias {
	return fwScopeMap(st, s, create,
		func(cf *ClusterFirewall) *map[string]*FirewallAlias { return &cf.Aliases },
		func(fw *GuestFirewall) *map[string]*FirewallAlias { return &fw.Aliases })
}

// fwIPSets returns the scope's IP sets, made when create is set.
func (st *State) fwIPSets(s AliasScope, create bool) map[string]*FirewallIPSet {
	return fwScopeMap(st, s, create,
		func(cf *ClusterFirewall) *map[string]*FirewallIPSet { return &cf.IPSets },
		func(fw *GuestFirewall) *map[string]*FirewallIPSet { return &fw.IPSets })
}

// fwScopeMap is the map that inCluster or inGuest picks out of the
// scope's config: nil when the config or the map is not there, unless
// create is set, which makes both.
func fwScopeMap[V any](st *State, s AliasScope, create bool, inCluster func(*ClusterFirewall) *map[string]V, inGuest func(*GuestFirewall) *map[string]V) map[string]V {
	var m *map[string]V
	switch {
	case s.VMID == 0 && create:
		m = inCluster(st.clusterFirewall())
	case s.VMID == 0:
		m = inCluster(st.clusterFirewallView())
	case create:
		m = inGuest(st.guestFirewall(s.VMID))
	case st.Firewall[s.VMID] != nil:
		m = inGuest(st.Firewall[s.VMID])
	default:
		return nil
	}
	if *m == nil && create {
		*m = map[string]V{}
	}
	return *m
}

// renameGroupRefs is the rename of a security group in every rule list
// that refers to it (Groups.pm $rename_fw_rules).
func (st *State) renameGroupRefs(old, name string) {
	rename := func(rules []FirewallRule) {
		for i := range rules {
			if rules[i].Type == "group" && rules[i].Action == old {
				rules[i].Action = name
			}
		}
	}
	for _, fw := range st.Firewall {
		rename(fw.Rules)
	}
	cf := st.clusterFirewallView()
	for _, rules := range cf.Hosts {
		rename(rules)
	}
	rename(cf.Rules)
}
