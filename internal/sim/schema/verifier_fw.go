package schema

import "github.com/corralhq/corral/internal/pvefw"

// pve-firewall's rule formats (PVE/Firewall.pm register_format), checked
// by the one implementation the manifest uses too.
func init() {
	dieOf := func(err error) error {
		if err != nil {
			return die(err.Error())
		}
		return nil
	}
	verifiers["pve-fw-addr-spec"] = func(_ *API, v string) error {
		_, err := pvefw.ParseAddressList(v)
		return dieOf(err)
	}
	verifiers["pve-fw-sport-spec"] = func(_ *API, v string) error { return dieOf(pvefw.ParsePorts(v, false)) }
	verifiers["pve-fw-dport-spec"] = func(_ *API, v string) error { return dieOf(pvefw.ParsePorts(v, true)) }
	verifiers["pve-fw-protocol-spec"] = func(_ *API, v string) error { return dieOf(pvefw.VerifyProtocol(v)) }
	verifiers["pve-fw-icmp-type-spec"] = func(_ *API, v string) error { return dieOf(pvefw.VerifyICMPType(v)) }
}
