package model

import (
	"maps"
	"strconv"
)

// The cluster's firewall options (API2/Firewall/Cluster.pm get_options,
// set_options; $cluster_option_properties). enable is an integer: a
// value above 1 is stored as the current time, the "enable for a while"
// form parse_clusterfw_option reads back as 0 a minute later.

var clusterFwOptionNames = []string{"ebtables", "enable", "log_ratelimit", "policy_forward", "policy_in", "policy_out"}

var clusterFwBools = map[string]bool{"ebtables": true}

var clusterFwNumeric = map[string]bool{"ebtables": true, "enable": true}

// ClusterFirewallOptions is GET /cluster/firewall/options.
func (fc *fwConfig) ClusterFirewallOptions() map[string]any {
	fc.stateMu.RLock()
	defer fc.stateMu.RUnlock()
	return fwOptionsOut(fc.clusterOptionsLocked(), clusterFwNumeric)
}

// clusterOptionsLocked are the options as parse_clusterfw_option reads
// them back: an enable timestamp older than a minute is 0.
func (fc *fwConfig) clusterOptionsLocked() map[string]string {
	opts := maps.Clone(fc.state().clusterFirewallView().Options)
	if v, ok := opts["enable"]; ok {
		if n, _ := strconv.ParseInt(v, 10, 64); n > 1 && fc.clock().Unix()-n > 60 {
			opts["enable"] = "0"
		}
	}
	return opts
}

// SetClusterFirewallOptions is PUT /cluster/firewall/options.
func (fc *fwConfig) SetClusterFirewallOptions(params map[string]string, deletes []string) error {
	fc.stateMu.Lock()
	defer fc.stateMu.Unlock()
	cur := fc.clusterOptionsLocked()
	if d := params["digest"]; d != "" && d != fwOptionsOut(cur, nil)["digest"] {
		return Failf("detected modified configuration - file changed by other user? Try again.\n")
	}
	next, err := applyFwOptions(cur, params, deletes, clusterFwOptionNames, clusterFwBools)
	if err != nil {
		return err
	}
	if v, ok := params["enable"]; ok {
		if n, _ := strconv.ParseInt(v, 10, 64); n > 1 {
			next["enable"] = strconv.FormatInt(fc.clock().Unix(), 10)
		} else {
			next["enable"] = strconv.FormatInt(n, 10)
		}
	}
	fc.state().clusterFirewall().Options = next
	return fc.saveLocked()
}
