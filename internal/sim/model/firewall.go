package model

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"slices"
	"strconv"
	"time"
)

// A guest's firewall config: pve-firewall's /etc/pve/firewall/<vmid>.fw
// (PVE/Firewall.pm load_vmfw_conf, API2/Firewall/VM.pm). The emulator
// stores and serves it; it filters no packets. The options are kept as
// the file holds them: booleans as 0/1, policies upper-case, log levels
// lower-case.

// The firewall is five parts, as pve-firewall's API is: fwConfig (a
// config as a whole: its options, a guest's log and references, and the
// guest's config copied and dropped with it; VM.pm, Cluster.pm),
// fwAliases (Aliases.pm), fwIPSets (IPSet.pm), fwRules (Rules.pm) and
// fwGroups (Groups.pm). Each holds no *Cluster, only fwParts
// (firewall_state.go) and what it needs besides; Cluster embeds them, so
// their methods are the Cluster's.

// fwConfig answers for a firewall config as a whole. Besides fwParts it
// holds the clock, for the cluster's timed enable.
type fwConfig struct {
	fwParts
	clock func() time.Time
}

// GuestFirewall is one guest's firewall config.
type GuestFirewall struct {
	Options map[string]string         `json:"options,omitempty"`
	Aliases map[string]*FirewallAlias `json:"aliases,omitempty"`
	IPSets  map[string]*FirewallIPSet `json:"ipsets,omitempty"`
	Rules   []FirewallRule            `json:"rules,omitempty"`
}

// fwBoolOptions are the vm_option_properties of type boolean, which the
// file (and so the API) holds as integers.
var fwBoolOptions = map[string]bool{"enable": true, "macfilter": true, "dhcp": true, "ndp": true, "radv": true, "ipfilter": true}

// fwOptionNames are every vm_option_properties key.
var fwOptionNames = []string{"dhcp", "enable", "ipfilter", "log_level_in", "log_level_out", "macfilter", "ndp", "policy_in", "policy_out", "radv"}

// FirewallOptions is GET .../firewall/options: the options set, and the
// digest copy_opject_with_digest computes over them. As in PVE, a guest
// that does not exist has an empty config (load_vmfw_conf reads a file
// that is not there), so only the node is checked.
func (fc *fwConfig) FirewallOptions(node string, vmid int) (map[string]any, error) {
	fc.stateMu.RLock()
	defer fc.stateMu.RUnlock()
	st := fc.state()
	if err := fc.nodes.checkNodeLocked(node); err != nil {
		return nil, err
	}
	opts, digest := fwOptionsWithDigest(st.Firewall[vmid])
	out := map[string]any{"digest": digest}
	for k, v := range opts {
		if fwBoolOptions[k] {
			n, _ := strconv.Atoi(v)
			out[k] = n
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// fwOptionsWithDigest returns fw's options and their digest: SHA-1 over
// "key:value\n" in key order.
func fwOptionsWithDigest(fw *GuestFirewall) (map[string]string, string) {
	var opts map[string]string
	if fw != nil {
		opts = fw.Options
	}
	h := sha1.New()
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		h.Write([]byte(k + ":" + opts[k] + "\n"))
	}
	return opts, hex.EncodeToString(h.Sum(nil))
}

// SetFirewallOptions is PUT .../firewall/options (set_options): digest
// must match (assert_if_modified), delete drops options (400 {delete:
// "no such option '<x>'"} for an unknown one), then each given option is
// set. params are the request's, already schema-checked.
func (fc *fwConfig) SetFirewallOptions(node string, vmid int, params map[string]string, deletes []string) error {
	fc.stateMu.Lock()
	defer fc.stateMu.Unlock()
	st := fc.state()
	if err := fc.nodes.checkNodeLocked(node); err != nil {
		return err
	}
	fw := st.Firewall[vmid]
	_, digest := fwOptionsWithDigest(fw)
	if d := params["digest"]; d != "" && d != digest {
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	var cur map[string]string
	if fw != nil {
		cur = fw.Options
	}
	next, err := applyFwOptions(cur, params, deletes, fwOptionNames, fwBoolOptions)
	if err != nil {
		return err
	}
	st.guestFirewall(vmid).Options = next
	return fc.saveLocked()
}

// applyFwOptions is set_options' change of an options map: delete drops
// options (400 {delete: "no such option '<x>'"} for one not in names),
// then each given option of names is set, the bools as 0/1.
func applyFwOptions(cur, params map[string]string, deletes, names []string, bools map[string]bool) (map[string]string, error) {
	next := maps.Clone(cur)
	if next == nil {
		next = map[string]string{}
	}
	for _, opt := range deletes {
		if !slices.Contains(names, opt) {
			return nil, ParamError(map[string]string{"delete": "no such option '" + opt + "'"})
		}
		delete(next, opt)
	}
	for _, k := range names {
		v, ok := params[k]
		if !ok {
			continue
		}
		if bools[k] {
			v = "0"
			if isTrue(params[k]) {
				v = "1"
			}
		}
		next[k] = v
	}
	return next, nil
}

// fwOptionsOut is an options map as the API gives it, numeric options
// as numbers, with its digest.
func fwOptionsOut(opts map[string]string, numeric map[string]bool) map[string]any {
	h := sha1.New()
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		v := opts[k]
		h.Write([]byte(k + ":" + v + "\n"))
		if numeric[k] {
			n, _ := strconv.Atoi(v)
			out[k] = n
		} else {
			out[k] = v
		}
	}
	out["digest"] = hex.EncodeToString(h.Sum(nil))
	return out
}

// removeFirewallLocked is remove_vmfw_conf: destroying a guest drops its
// firewall config.
func (fc *fwConfig) removeFirewallLocked(vmid int) {
	st := fc.state()
	if _, ok := st.Firewall[vmid]; ok {
		delete(st.Firewall, vmid)
		fc.journal.markCore()
	}
}

// cloneFirewallLocked is clone_vmfw_conf: a clone gets a copy of the
// source's firewall config, if it has one.
func (fc *fwConfig) cloneFirewallLocked(from, to int) {
	st := fc.state()
	fw := st.Firewall[from]
	if fw == nil {
		return
	}
	aliases := map[string]*FirewallAlias{}
	for k, a := range fw.Aliases {
		cp := *a
		aliases[k] = &cp
	}
	sets := map[string]*FirewallIPSet{}
	for k, set := range fw.IPSets {
		sets[k] = &FirewallIPSet{Comment: set.Comment, Entries: slices.Clone(set.Entries)}
	}
	st.Firewall[to] = &GuestFirewall{Options: maps.Clone(fw.Options), Aliases: aliases, IPSets: sets, Rules: slices.Clone(fw.Rules)}
	fc.journal.markCore()
}

// FirewallRefs is GET .../firewall/refs (collect_refs): what a CT's rules
// may name, the cluster's ("dc") then the CT's ("guest"), in each scope
// the IP sets ("+name") and then the aliases, by their lower-cased keys;
// typ "alias" or "ipset" keeps one kind. PVE walks hashes, in no set
// order; this is sorted.
func (fc *fwConfig) FirewallRefs(node string, vmid int, typ string) ([]map[string]any, error) {
	fc.stateMu.RLock()
	defer fc.stateMu.RUnlock()
	st := fc.state()
	if err := fc.nodes.checkNodeLocked(node); err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, sc := range []struct {
		name  string
		scope AliasScope
	}{{"dc", AliasScope{}}, {"guest", AliasScope{Node: node, VMID: vmid}}} {
		if typ == "" || typ == "ipset" {
			sets := st.fwIPSets(sc.scope, false)
			for _, key := range slices.Sorted(maps.Keys(sets)) {
				out = append(out, refEntry("ipset", key, "+"+key, sc.name, sets[key].Comment))
			}
		}
		if typ == "" || typ == "alias" {
			aliases := st.fwAliases(sc.scope, false)
			for _, key := range slices.Sorted(maps.Keys(aliases)) {
				out = append(out, refEntry("alias", key, key, sc.name, aliases[key].Comment))
			}
		}
	}
	return out, nil
}

func refEntry(typ, name, ref, scope, comment string) map[string]any {
	e := map[string]any{"type": typ, "name": name, "ref": ref, "scope": scope}
	if comment != "" {
		e["comment"] = comment
	}
	return e
}

// FirewallLog is what /var/log/pve-firewall.log holds for a guest: the
// emulator filters no packets, so nothing. Only the node is checked, as
// the log is read whatever the guest.
func (fc *fwConfig) FirewallLog(node string, vmid int) ([]string, error) {
	fc.stateMu.RLock()
	defer fc.stateMu.RUnlock()
	return nil, fc.nodes.checkNodeLocked(node)
}
