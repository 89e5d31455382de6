package schema

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/pvesize"
)

// A verifier is a registered PVE format function (register_format with a
// code ref). It returns nil or the error its Perl original dies with.
type verifier func(a *API, v string) error

// die is a Perl die message, kept byte for byte: text includes the
// trailing newline(s) the Perl source has.
type die string

func (d die) Error() string { return strings.TrimRight(string(d), "\n") }

// dief formats a die message that ends in a newline, as nearly all of the
// verifiers' messages do.
func dief(format string, args ...any) error { return die(fmt.Sprintf(format, args...) + "\n") }

// perlText is the text Perl's $@ holds after the error was thrown.
func perlText(err error) string {
	switch e := err.(type) {
	case die:
		return string(e)
	case *FormatError:
		return e.text()
	}
	return err.Error() + "\n"
}

// Regular expressions of PVE::Tools, PVE::JSONSchema and the plugins,
// written in Perl syntax and compiled through perlToRE2.
const (
	ipv4Octet = `(?:25[0-5]|(?:2[0-4]|1[0-9]|[1-9])?[0-9])`
	ipv4RE    = `(?:(?:` + ipv4Octet + `\.){3}` + ipv4Octet + `)`
	ipv6H16   = `(?:[0-9a-fA-F]{1,4})`
	ipv6LS32  = `(?:(?:` + ipv4RE + `|` + ipv6H16 + `:` + ipv6H16 + `))`
	ipv6RE    = `(?:` +
		`(?:(?:(?:` + ipv6H16 + `:){6})` + ipv6LS32 + `)|` +
		`(?:(?:::(?:` + ipv6H16 + `:){5})` + ipv6LS32 + `)|` +
		`(?:(?:(?:` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){4})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,1}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){3})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,2}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){2})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,3}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){1})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,4}` + ipv6H16 + `)?::)` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,5}` + ipv6H16 + `)?::)` + ipv6H16 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,6}` + ipv6H16 + `)?::)))`
	emailUserRE = `[\w\+\-\~]+(\.[\w\+\-\~]+)*`
	emailRE     = emailUserRE + `@[a-zA-Z0-9\-]+(\.[a-zA-Z0-9\-]+)*`
	realmRE     = `[A-Za-z][A-Za-z0-9\.\-_]+`
	userRE      = `[^\s:/]+`
	idRE        = `[a-z][a-z0-9\-\_\.]*[a-z0-9]`
)

var (
	reConfigID   = mustPerl(`^(?i:[a-z][a-z0-9_-]+)$`)
	reID         = mustPerl(`^(?i:` + idRE + `)$`)
	reBridgeID   = mustPerl(`^[-_.\w\d]+$`)
	reURLEncoded = mustPerl(`^[-%a-zA-Z0-9_.!~*'()]*$`)
	reVMID       = mustPerl(`^[1-9][0-9]{2,8}$`)
	reNode       = mustPerl(`^([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`)
	reMAC        = mustPerl(`^(?i:[a-f0-9][02468ace](?::[a-f0-9]{2}){5})$`)
	reIPv4       = mustPerl(`^(?:` + ipv4RE + `)$`)
	reIPv6       = mustPerl(`^(?:` + ipv6RE + `)$`)
	reIP         = mustPerl(`^(?:(?:` + ipv4RE + `)|(?:` + ipv6RE + `))$`)
	reCIDRv4     = mustPerl(`^(?:` + ipv4RE + `)(?:/(\d+))$`)
	reCIDRv6     = mustPerl(`^(?:` + ipv6RE + `)(?:/(\d+))$`)
	reIPv4Mode   = mustPerl(`^(?:dhcp|manual)$`)
	reIPv6Mode   = mustPerl(`^(?:auto|dhcp|manual)$`)
	reLDAPAttr   = mustPerl(`^[a-zA-Z0-9]+$`)
	reEmail      = mustPerl(`^` + emailRE + `$`)
	reEmailUser  = mustPerl(`^` + emailUserRE + `$`)
	reDNSName    = mustPerl(`^(([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`)
	reIface      = mustPerl(`^(?i:[a-z][a-z0-9_]{1,20}([:\.]\d+)?)$`)
	reVLAN       = mustPerl(`^(\d+)(?:-(\d+))?$`)
	reTag        = mustPerl(`^(?i:[a-z0-9_][a-z0-9_\-\+\.]*)$`)
	reTaskStatus = mustPerl(`^(?i:ok|error|warning|unknown)$`)
	reTFASecret  = []*lazyre.Regexp{
		mustPerl(`^v2-0x[0-9a-fA-F]{16,128}$`),
		mustPerl(`^v2-[A-Z2-7=]{16,128}$`),
		mustPerl(`^(?:[A-Z2-7=]{16}|[A-Fa-f0-9]{40})$`),
	}
	reStartupPart = mustPerl(`^\s*$`)
	reStartupOrd  = mustPerl(`^(order=)?(\d+)$`)
	reStartupUp   = mustPerl(`^up=(\d+)$`)
	reStartupDown = mustPerl(`^down=(\d+)$`)
	reIDPair      = mustPerl(`^([^:]+):([^:]+)$`)
	reLLIface     = mustPerl(`^(fe80:[^%]+)%(.*)$`)
	reRealm       = mustPerl(`^` + realmRE + `$`)
	reUserID      = mustPerl(`^(` + userRE + `)\@(` + realmRE + `)$`)
	reTokenID     = mustPerl(`^((` + userRE + `)\@(` + realmRE + `))!(` + realmRE + `)$`)
	reGroupRole   = mustPerl(`^[A-Za-z0-9\.\-_]+$`)
	rePool        = mustPerl(`^[A-Za-z0-9\.\-_]+(?:/[A-Za-z0-9\.\-_]+){0,2}$`)
	reVolumeID    = mustPerl(`^(?i:` + idRE + `):(.+)$`)
	reMPIllegal   = []*lazyre.Regexp{mustPerl(`/\.\.?/`), mustPerl(`/\.\.?$`), mustPerl(`^\.\./`)}
	reDevIllegal  = mustPerl(`/\.\.?(?:/|$)`)
	reDevPrefix   = mustPerl(`^/dev/`)
	reStoragePath = mustPerl(`^/[^;\(\)]+`)
	reLVMName     = mustPerl(`^(?i:[a-z0-9][a-z0-9\-\_\.]*[a-z0-9])$`)
	reHostPort    = []*lazyre.Regexp{
		mustPerl(`^(` + ipv4RE + `|[[:alnum:]\-.]+)(?::(\d+))?$`),
		mustPerl(`^\[(` + ipv6RE + `|` + ipv4RE + `|[[:alnum:]\-.]+)\](?::(\d+))?$`),
		mustPerl(`^(` + ipv6RE + `)(?:\.(\d+))?$`),
	}
	reNoSpace     = mustPerl(`^\S+$`)
	reStorageFmt  = mustPerl(`^(raw|qcow2|vmdk|subvol)$`)
	reDirOverride = mustPerl(`^([a-z]+)=([^.]*(?:\.?[^.]+)+)$`)
	reSDNID       = mustPerl(`^(?i:[a-z][a-z0-9]*[a-z0-9])$`)
	reSDNCtrlID   = mustPerl(`^(?i:[a-z][a-z0-9_-]*[a-z0-9])$`)
	reSDNFabricID = mustPerl(`^(?i:[a-zA-Z0-9][a-zA-Z0-9-]{0,6}[a-zA-Z0-9]?)$`)
)

// storageContentTypes are the content types of pve-storage's dir plugin,
// which "includes all other types" (Plugin.pm verify_content).
var storageContentTypes = map[string]bool{
	"images": true, "rootdir": true, "vztmpl": true, "iso": true,
	"backup": true, "snippets": true, "none": true, "import": true,
}

// verifiers maps registered format names to their verifier. Formats the
// schemas name but this table lacks are accepted unchecked; see
// UnverifiedFormats.
var verifiers = map[string]verifier{
	// pve-common src/PVE/JSONSchema.pm
	"string":       func(*API, string) error { return nil },
	"timezone":     func(_ *API, v string) error { return verifyTimezone(v) },
	"urlencoded":   matchOr(reURLEncoded, "invalid urlencoded string: %s"),
	"pve-configid": matchOr(reConfigID, "invalid configuration ID '%s'"),
	"pve-storage-id": func(_ *API, v string) error {
		return parseID(v, "storage")
	},
	"acme-plugin-id": func(_ *API, v string) error { return parseID(v, "ACME plugin") },
	"pve-bridge-id":  matchOr(reBridgeID, "invalid bridge ID '%s'"),
	"pve-vmid":       matchFixed(reVMID, "value does not look like a valid VM ID"),
	"pve-node":       matchFixed(reNode, "value does not look like a valid node name"),
	"storage-pair":   func(_ *API, v string) error { return verifyIDPair(v, parseStorageID) },
	"bridge-pair":    func(_ *API, v string) error { return verifyIDPair(v, parseBridgeID) },
	"mac-addr":       matchFixed(reMAC, "value does not look like a valid unicast MAC address"),
	"ipv4":           matchFixed(reIPv4, "value does not look like a valid IPv4 address"),
	"ipv6":           matchFixed(reIPv6, "value does not look like a valid IPv6 address"),
	"ip":             matchFixed(reIP, "value does not look like a valid IP address"),
	"ldap-simple-attr": func(_ *API, v string) error {
		if reLDAPAttr.MatchString(v) {
			return nil
		}
		return dief("value '%s' does not look like a simple ldap attribute name", v)
	},
	"ipv4mask": func(_ *API, v string) error {
		if _, ok := ipv4Masks[v]; ok {
			return nil
		}
		return dief("value does not look like a valid IP netmask")
	},
	"CIDRv6": func(_ *API, v string) error {
		if isCIDRv6(v) {
			return nil
		}
		return dief("value does not look like a valid IPv6 CIDR network")
	},
	"CIDRv4": func(_ *API, v string) error {
		if isCIDRv4(v) {
			return nil
		}
		return dief("value does not look like a valid IPv4 CIDR network")
	},
	// IPorCIDR is pve-firewall's pve_verify_ip_or_cidr: an address, or
	// one with a prefix length Net::IP accepts (up to 32 or 128).
	"IPorCIDR": func(_ *API, v string) error {
		addr, bits, hasBits := strings.Cut(v, "/")
		max := 32
		if reIPv6.MatchString(addr) {
			max = 128
		} else if !reIPv4.MatchString(addr) {
			return dief("value does not look like a valid IP address or CIDR network")
		}
		if hasBits {
			n, err := strconv.Atoi(bits)
			if err != nil || n > max || bits == "" {
				return dief("value does not look like a valid IP address or CIDR network")
			}
		}
		return nil
	},
	"CIDR": func(_ *API, v string) error {
		if isCIDRv4(v) || isCIDRv6(v) {
			return nil
		}
		return dief("value does not look like a valid CIDR network")
	},
	"pve-ipv4-config": func(_ *API, v string) error {
		if reIPv4Mode.MatchString(v) || isCIDRv4(v) {
			return nil
		}
		return dief("value does not look like a valid ipv4 network configuration")
	},
	"pve-ipv6-config": func(_ *API, v string) error {
		if reIPv6Mode.MatchString(v) || isCIDRv6(v) {
			return nil
		}
		return dief("value does not look like a valid ipv6 network configuration")
	},
	"email": matchFixed(reEmail, "value does not look like a valid email address"),
	"email-or-username": func(_ *API, v string) error {
		if reEmail.MatchString(v) || reEmailUser.MatchString(v) {
			return nil
		}
		return dief("value does not look like a valid email address or user name")
	},
	"dns-name":             matchFixed(reDNSName, "value does not look like a valid DNS name"),
	"pve-iface":            matchOr(reIface, "invalid network interface name '%s'"),
	"pve-vlan-id-or-range": verifyVLANRange,
	"address": func(_ *API, v string) error {
		if reIP.MatchString(v) || reDNSName.MatchString(v) {
			return nil
		}
		return dief("value does not look like a valid address: %s", v)
	},
	"disk-size": func(_ *API, v string) error {
		// A size past 8 EiB is still of the form (Perl keeps it as a
		// float): PVE accepts it here.
		if _, err := pvesize.Parse(v); err == nil || errors.Is(err, pvesize.ErrTooLarge) {
			return nil
		}
		return dief("value does not look like a valid disk size: %s", v)
	},
	"pve-startup-order": func(_ *API, v string) error {
		if validStartupOrder(v) {
			return nil
		}
		return dief("unable to parse startup options")
	},
	"pve-tfa-secret": func(_ *API, v string) error {
		for _, re := range reTFASecret {
			if re.MatchString(v) {
				return nil
			}
		}
		return dief("unable to decode TFA secret")
	},
	"pve-task-status-type": matchOr(reTaskStatus, "invalid status '%s'"),
	"pve-tag":              matchFixed(reTag, "invalid characters in tag"),

	// pve-container src/PVE/LXC/Config.pm
	"pve-lxc-mp-string": func(_ *API, v string) error {
		for _, re := range reMPIllegal {
			if re.MatchString(v) {
				return dief("%s contains illegal character sequences", v)
			}
		}
		return nil
	},
	"pve-lxc-dev-string": func(_ *API, v string) error {
		if reDevIllegal.MatchString(v) || !reDevPrefix.MatchString(v) {
			return dief("%s is not a valid device path", v)
		}
		return nil
	},
	"lxc-ip-with-ll-iface": func(_ *API, v string) error {
		if m := reLLIface.FindStringSubmatch(v); m != nil {
			if reIP.MatchString(m[1]) && reIface.MatchString(m[2]) {
				return nil
			}
		}
		return matchFixed(reIP, "value does not look like a valid IP address")(nil, v)
	},
	// pve-ct-timezone (LXC/Config.pm verify_ct_timezone) is "host" or
	// what pve_verify_timezone accepts: "UTC" or a zone of zone.tab.
	"pve-ct-timezone": func(_ *API, v string) error {
		if v == "host" {
			return nil
		}
		return verifyTimezone(v)
	},

	// pve-storage src/PVE/Storage.pm, Storage/Plugin.pm
	"pve-volume-id":    verifyVolumeID,
	"pve-storage-path": matchFixed(reStoragePath, "value does not look like a valid absolute path"),
	"pve-storage-server": func(_ *API, v string) error {
		if reIP.MatchString(v) || reDNSName.MatchString(v) {
			return nil
		}
		return dief("value does not look like a valid server name or IP address")
	},
	"pve-storage-vgname": matchOr(reLVMName, "lvm name '%s' contains illegal characters"),
	"pve-storage-portal-dns": func(_ *API, v string) error {
		for _, re := range reHostPort {
			if re.MatchString(v) {
				return nil
			}
		}
		return dief("value does not look like a valid portal address")
	},
	"pve-storage-content": verifyContent,
	"pve-storage-format":  matchOr(reStorageFmt, "invalid format '%s'"),
	"pve-storage-options": matchOr(reNoSpace, "invalid options '%s'"),
	"pve-dir-override": func(a *API, v string) error {
		if m := reDirOverride.FindStringSubmatch(v); m != nil {
			if err := verifyContent(a, m[1]); err == nil && len(m[2]) < 1023 {
				ok := true
				for _, part := range strings.Split(m[2], "/") {
					if len(part) >= 255 {
						ok = false
					}
				}
				if ok {
					return nil
				}
			} else if err != nil {
				return err
			}
		}
		return dief("invalid override '%s'", v)
	},

	// pve-access-control src/PVE/Auth/Plugin.pm, src/PVE/AccessControl.pm
	"pve-realm":  matchFixed(reRealm, "value does not look like a valid realm"),
	"pve-userid": verifyUsername,
	"pve-tokenid": func(_ *API, v string) error {
		if reTokenID.MatchString(v) {
			return nil
		}
		return dief("value '%s' does not look like a valid token ID", v)
	},
	"pve-groupid": matchOr(reGroupRole, "group name '%s' contains invalid characters"),
	"pve-roleid":  matchOr(reGroupRole, "role name '%s' contains invalid characters"),
	"pve-poolid": func(_ *API, v string) error {
		// Nested pools (PVE ≥ 8.1): at most three levels.
		if len(perlSplit(v, "/")) > 3 {
			return dief("pool name '%s' nested too deeply (max levels = 3)", v)
		}
		if !rePool.MatchString(v) {
			return dief("pool name '%s' contains invalid characters", v)
		}
		return nil
	},
	"pve-priv": func(a *API, v string) error {
		if a != nil && a.privs[v] {
			return nil
		}
		return dief("invalid privilege '%s'", v)
	},

	// qemu-server PVE/QemuServer.pm
	"pve-volume-id-or-qm-path": func(a *API, v string) error {
		if v == "none" || v == "cdrom" {
			return nil
		}
		return verifyVolumeIDOrPath(a, v)
	},
	"pve-volume-id-or-absolute-path": verifyVolumeIDOrPath,

	// pve-network src/PVE/Network/SDN/*.pm
	"pve-sdn-zone-id": func(_ *API, v string) error { return sdnID(v, "zone", reSDNID, 8) },
	"pve-sdn-vnet-id": func(_ *API, v string) error { return sdnID(v, "vnet", reSDNID, 8) },
	"pve-sdn-controller-id": func(_ *API, v string) error {
		return sdnID(v, "controller", reSDNCtrlID, 64)
	},
	"pve-sdn-ipam-id": func(_ *API, v string) error { return sdnID(v, "ipam", reSDNID, 0) },
	"pve-sdn-dns-id":  func(_ *API, v string) error { return sdnID(v, "dns", reSDNID, 0) },
	"pve-sdn-fabric-id": func(_ *API, v string) error {
		if reSDNFabricID.MatchString(v) {
			return nil
		}
		return dief("Fabric ID '%s' contains illegal characters", v)
	},
	"pve-sdn-subnet-id": func(_ *API, v string) error {
		cidr := v
		if !strings.Contains(v, "/") {
			parts := strings.Split(v, "-")
			for len(parts) < 3 {
				parts = append(parts, "")
			}
			cidr = parts[1] + "/" + parts[2]
		}
		if isCIDRv4(cidr) || isCIDRv6(cidr) {
			return nil
		}
		return dief("value does not look like a valid CIDR network")
	},
}

// matchOr is a verifier that dies with format(value) when re fails.
func matchOr(re *lazyre.Regexp, format string) verifier {
	return func(_ *API, v string) error {
		if re.MatchString(v) {
			return nil
		}
		return dief(format, v)
	}
}

// matchFixed is a verifier that dies with a fixed message when re fails.
func matchFixed(re *lazyre.Regexp, msg string) verifier {
	return func(_ *API, v string) error {
		if re.MatchString(v) {
			return nil
		}
		return dief("%s", msg)
	}
}

func verifyVolumeID(_ *API, v string) error {
	if reVolumeID.MatchString(v) {
		return nil
	}
	return dief("unable to parse volume ID '%s'", v)
}

func verifyVolumeIDOrPath(a *API, v string) error {
	if strings.HasPrefix(v, "/") {
		return nil
	}
	return verifyVolumeID(a, v)
}

func parseID(v, what string) error {
	if reID.MatchString(v) {
		return nil
	}
	return dief("%s ID '%s' contains illegal characters", what, v)
}

func parseStorageID(v string) error { return parseID(v, "storage") }

func parseBridgeID(v string) error {
	if reBridgeID.MatchString(v) {
		return nil
	}
	return dief("invalid bridge ID '%s'", v)
}

// verifyIDPair is JSONSchema.pm's $verify_idpair around parse_idmap: it
// wraps parse_idmap's message in "$@\n", so the text gains a newline.
func verifyIDPair(v string, check func(string) error) error {
	if err := parseIDMap(v, check); err != nil {
		return die(perlText(err) + "\n")
	}
	return nil
}

func parseIDMap(idmap string, check func(string) error) error {
	if !perlTruthy(idmap) {
		return nil
	}
	var identity, hasDefault bool
	entries := map[string]bool{}
	for _, entry := range splitList(idmap) {
		switch m := reIDPair.FindStringSubmatch(entry); {
		case entry == "1":
			identity = true
		case m != nil:
			for _, id := range m[1:] {
				if err := check(id); err != nil {
					return die(fmt.Sprintf("entry '%s' contains invalid ID - %s\n", entry, perlText(err)))
				}
			}
			if entries[m[1]] {
				return dief("duplicate mapping for source '%s'", m[1])
			}
			entries[m[1]] = true
		default:
			if err := check(entry); err != nil {
				return die(fmt.Sprintf("entry '%s' contains invalid ID - %s\n", entry, perlText(err)))
			}
			if hasDefault {
				return dief("default target ID can only be provided once")
			}
			hasDefault = true
		}
	}
	if identity && (hasDefault || len(entries) > 0) {
		return dief("identity mapping cannot be combined with other mappings")
	}
	return nil
}

var ipv4Masks = func() map[string]int {
	m := map[string]int{}
	for bits := 0; bits <= 32; bits++ {
		mask := uint32(0)
		if bits > 0 {
			mask = ^uint32(0) << (32 - bits)
		}
		m[fmt.Sprintf("%d.%d.%d.%d", mask>>24, mask>>16&0xff, mask>>8&0xff, mask&0xff)] = bits
	}
	return m
}()

func isCIDRv4(v string) bool { return cidrBits(reCIDRv4, v, 32) }
func isCIDRv6(v string) bool { return cidrBits(reCIDRv6, v, 128) }

// cidrBits: the prefix length must be > 7 and <= max (pve_verify_cidrv4/6).
func cidrBits(re *lazyre.Regexp, v string, max int) bool {
	m := re.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	return perlNumCmp(m[1], "7") > 0 && perlNumCmp(m[1], strconv.Itoa(max)) <= 0
}

func verifyVLANRange(_ *API, v string) error {
	m := reVLAN.FindStringSubmatch(v)
	if m == nil {
		return dief("invalid VLAN configuration '%s'", v)
	}
	validTag := func(tag string) error {
		if perlNumCmp(tag, "2") < 0 || perlNumCmp(tag, "4094") > 0 {
			return dief("invalid VLAN tag '%s'", tag)
		}
		return nil
	}
	if err := validTag(m[1]); err != nil {
		return err
	}
	if perlTruthy(m[2]) {
		if err := validTag(m[2]); err != nil {
			return err
		}
		if perlNumCmp(m[1], m[2]) >= 0 {
			return dief("VLAN range must go from lower to higher tag '%s'", v)
		}
	}
	return nil
}

// validStartupOrder is pve_parse_startup_order's acceptance: every
// non-blank comma part is [order=]N, up=N or down=N; an empty (or "0")
// value is rejected.
func validStartupOrder(v string) bool {
	if !perlTruthy(v) {
		return false
	}
	for _, part := range perlSplit(v, ",") {
		if reStartupPart.MatchString(part) {
			continue
		}
		if !reStartupOrd.MatchString(part) && !reStartupUp.MatchString(part) && !reStartupDown.MatchString(part) {
			return false
		}
	}
	return true
}

func verifyContent(_ *API, v string) error {
	if storageContentTypes[v] {
		return nil
	}
	return dief("invalid content type '%s'", v)
}

// verifyUsername is pve-access-control's verify_username.
func verifyUsername(_ *API, v string) error {
	if !perlTruthy(v) {
		v = ""
	}
	n := perlLength(v)
	if n < 3 {
		return dief("user name '%s' is too short", v)
	}
	if n > 64 {
		return dief("user name '%s' is too long (%d > 64)", v, n)
	}
	if reUserID.MatchString(v) {
		return nil
	}
	return dief("value '%s' does not look like a valid user name", v)
}

func sdnID(v, what string, re *lazyre.Regexp, maxLen int) error {
	if !re.MatchString(v) {
		return dief("%s ID '%s' contains illegal characters", what, v)
	}
	if maxLen > 0 && perlLength(v) > maxLen {
		return dief("%s ID '%s' can't be more length than %d characters", what, v, maxLen)
	}
	return nil
}

// verifyTimezone is pve-common's pve_verify_timezone.
func verifyTimezone(v string) error {
	if v == "UTC" || zoneTab[v] {
		return nil
	}
	return dief("invalid time zone '%s'", v)
}

// UnverifiedFormats lists the named formats this schema uses for which no
// verifier exists here; values in them are accepted unchecked. Most are
// hash-based formats PVE's dump names without inlining (prune-backups…),
// and qemu and firewall formats the emulator does not serve.
func (a *API) UnverifiedFormats() []string {
	seen := map[string]bool{}
	var walk func(p *Prop)
	walk = func(p *Prop) {
		if p == nil {
			return
		}
		if p.Format != "" {
			name, _ := splitFormatName(p.Format)
			if _, ok := verifiers[name]; !ok {
				seen[name] = true
			}
		}
		if p.PropertyFormat != nil {
			for _, k := range p.PropertyFormat.Keys {
				walk(k)
			}
		}
		for _, q := range p.Properties {
			walk(q)
		}
		for _, q := range p.OneOf {
			walk(q)
		}
		walk(p.Items)
	}
	for _, m := range a.routes {
		walk(m.Parameters)
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
