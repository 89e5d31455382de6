package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/corralhq/corral/internal/sim/model"
)

// Authentication realm routes (pve-access-control API2/Domains.pm), read
// only: the two realms of a default install, whose domains.cfg the
// emulator never changes. Ansible's proxmox_domain_info reads them.

// simDomains are domains.cfg's realms as Auth::Plugin parse_config
// completes them: pam gets its plugin, both their default comments.
var simDomains = map[string]map[string]any{
	"pam": {"type": "pam", "comment": "Linux PAM standard authentication", "plugin": "PVE::Auth::PAM"},
	"pve": {"type": "pve", "comment": "Proxmox VE authentication server"},
}

// simDomainsCfg is a default install's domains.cfg, whose digest the
// realm's configuration carries.
const simDomainsCfg = "pam: pam\n\tcomment Linux PAM standard authentication\n\npve: pve\n\tcomment Proxmox VE authentication server\n\n"

// getDomains is GET /access/domains: realm, type and comment of each
// (PVE walks a hash; sorted here).
func (a *accessAPI) getDomains(r *request) (any, error) {
	out := []map[string]any{}
	for _, realm := range slices.Sorted(maps.Keys(simDomains)) {
		d := simDomains[realm]
		out = append(out, map[string]any{"realm": realm, "type": d["type"], "comment": d["comment"]})
	}
	return out, nil
}

// getDomain is GET /access/domains/{realm} (Realm.Allocate or Sys.Audit
// on /access/realm, checked by the schema): the realm's configuration
// with the file's digest.
func (a *accessAPI) getDomain(r *request) (any, error) {
	d, ok := simDomains[r.params["realm"]]
	if !ok {
		return nil, model.Failf("domain '%s' does not exist\n", r.params["realm"])
	}
	out := maps.Clone(d)
	sum := sha1.Sum([]byte(simDomainsCfg))
	out["digest"] = hex.EncodeToString(sum[:])
	return out, nil
}
