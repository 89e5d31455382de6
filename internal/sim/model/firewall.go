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

// firewall answers for the cluster's, the nodes' and the guests'
// firewall config (firewall*.go). It holds no *Cluster: the State's lock
// and the State, the clock (the cluster's timed enable), the node check
// and the journal. Cluster embeds it, so its methods are the Cluster's.
type firewall struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	// nodes checks a route's node: a guest's and a node's config need
	// only the node to exist (load_vmfw_conf reads a file that may not
	// be there).
	nodes   interface{ checkNodeLocked(node string) error }
	journal coreJournal
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
func (fx *firewall) FirewallOptions(node string, vmid int) (map[string]any, error) {
	fx.stateMu.RLock()
	defer fx.stateMu.RUnlock()
	st := fx.state()
	if err := fx.nodes.checkNodeLocked(node); err != nil {
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
func (fx *firewall) SetFirewallOptions(node string, vmid int, params map[string]string, deletes []string) error {
	fx.stateMu.Lock()
	defer fx.stateMu.Unlock()
	st := fx.state()
	if err := fx.nodes.checkNodeLocked(node); err != nil {
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
	if st.Firewall == nil {
		st.Firewall = map[int]*GuestFirewall{}
	}
	if fw == nil {
		fw = &GuestFirewall{}
		st.Firewall[vmid] = fw
	}
	fw.Options = next
	fx.journal.markCore()
	return fx.journal.saveLocked()
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
func (fx *firewall) removeFirewallLocked(vmid int) {
	st := fx.state()
	if _, ok := st.Firewall[vmid]; ok {
		delete(st.Firewall, vmid)
		fx.journal.markCore()
	}
}

// cloneFirewallLocked is clone_vmfw_conf: a clone gets a copy of the
// source's firewall config, if it has one.
func (fx *firewall) cloneFirewallLocked(from, to int) {
	st := fx.state()
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
	fx.journal.markCore()
}
