package model

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// pve-container's Debian network and DNS setup (PVE::LXC::Setup::Debian
// setup_network, Base set_dns), which PVE runs in the CT's root file
// system at create (post_create_hook) and again before every start
// (pre_start_hook), so a changed netN, nameserver or searchdomain is in
// the CT's files at its next boot:
//
//   - /etc/network/interfaces: "auto <name>" and an "iface <name> inet
//     dhcp|manual|static" stanza per netN with a name (static: "address
//     <cidr>" and "gateway <gw>", or PVE's marked post-up route scripts
//     when gw lies outside the address's network), and the same for
//     inet6 (auto, dhcp, manual or static); stanzas of other interfaces
//     and other lines are kept, an existing stanza of a configured
//     interface keeps its other attributes, and lo is declared when the
//     file has no "auto lo".
//   - /etc/resolv.conf: PVE's marked section with "search" and
//     "nameserver" lines from searchdomain and nameserver, or, where
//     unset, the host's own search and first three nameservers.
//
// In the LXC runtime the emulator has already set the addresses when
// the CT's init runs (guest.bridgeNet), so ifupdown finds them in place.

// ctNetSetupOSTypes are the ostypes whose setup writes ifupdown's file.
var ctNetSetupOSTypes = map[string]bool{"debian": true, "ubuntu": true, "devuan": true}

// hostResolvConf is the host's resolver file (a variable for tests).
// HostResolvConfEnv names another file to read instead: an emulator run
// offline (in a network namespace of its own) gives its CTs a resolver
// that fails at once rather than the host's, which they cannot reach
// there and would wait on for each lookup.
var hostResolvConf = cmp.Or(os.Getenv(HostResolvConfEnv), "/etc/resolv.conf")

// HostResolvConfEnv is the variable that replaces the host's
// /etc/resolv.conf as the source of a CT's DNS settings.
const HostResolvConfEnv = "CORRAL_SIM_HOST_RESOLV_CONF"

// GuestPreStart does PVE's pre-start setup of CT vmid's network and DNS
// in its root file system at rootDir (the guest layer calls it before it
// boots the CT).
func (c *Cluster) GuestPreStart(vmid int, rootDir string) error {
	c.mu.RLock()
	g := c.st.Guests[vmid]
	var conf map[string]string
	if g != nil {
		conf = make(map[string]string, len(g.Config))
		for k, v := range g.Config {
			conf[k] = v
		}
	}
	c.mu.RUnlock()
	if g == nil {
		return fmt.Errorf("no CT %d", vmid)
	}
	return ctSetupNetworkAndDNS(rootDir, conf)
}

// ctSetupNetworkAndDNS writes the CT's interfaces and resolv.conf as
// pve-container's setup does for its ostype.
func ctSetupNetworkAndDNS(rootDir string, conf map[string]string) error {
	if !ctNetSetupOSTypes[conf["ostype"]] {
		return nil
	}
	if fi, err := os.Lstat(filepath.Join(rootDir, "etc")); err != nil || !fi.IsDir() {
		return nil // no system here (or a gone rootfs): nothing to set up
	}
	if err := ctSetupInterfaces(rootDir, conf); err != nil {
		return fmt.Errorf("set up /etc/network/interfaces: %w", err)
	}
	if err := ctSetDNS(rootDir, conf); err != nil {
		return fmt.Errorf("set up /etc/resolv.conf: %w", err)
	}
	return nil
}

// ctNetIface is what setup_network knows of one named netN.
type ctNetIface struct {
	addr, cidr, gw          string // addr: dhcp | manual | the address
	needsRoute              bool
	addr6, cidr6, gw6       string
	needsRoute6, has4, has6 bool
}

func ctNetworks(conf map[string]string) map[string]*ctNetIface {
	nets := map[string]*ctNetIface{}
	for _, key := range netKeys(conf) {
		d, err := ParseNet(conf[key])
		if err != nil || d["name"] == "" {
			continue
		}
		n := &ctNetIface{}
		var cidr *net.IPNet
		if ip, ok := d["ip"]; ok && ip != "" {
			n.has4 = true
			if ip == "dhcp" || ip == "manual" {
				n.addr = ip
			} else if a, c, err := net.ParseCIDR(ip); err == nil {
				n.addr, n.cidr, cidr = a.String(), ip, c
			}
		}
		if gw := d["gw"]; gw != "" {
			n.gw = gw
			if cidr != nil && !cidr.Contains(net.ParseIP(gw)) {
				n.needsRoute = true
			}
		}
		cidr = nil
		if ip6, ok := d["ip6"]; ok && ip6 != "" {
			n.has6 = true
			if ip6 == "auto" || ip6 == "dhcp" || ip6 == "manual" {
				n.addr6 = ip6
			} else if a, c, err := net.ParseCIDR(ip6); err == nil {
				n.addr6, n.cidr6, cidr = a.String(), ip6, c
			}
		}
		if gw6 := d["gw6"]; gw6 != "" {
			n.gw6 = gw6
			_, ll, _ := net.ParseCIDR("fe80::/10")
			if cidr != nil && !cidr.Contains(net.ParseIP(gw6)) && !ll.Contains(net.ParseIP(gw6)) {
				n.needsRoute6 = true
			}
		}
		if n.has4 || n.has6 || n.gw != "" || n.gw6 != "" {
			nets[d["name"]] = n
		}
	}
	return nets
}

// ctGatewayScripts are PVE's marked routes to a gateway outside the
// interface's network.
func ctGatewayScripts(ifname, gw string) string {
	return "# --- BEGIN PVE ---\n" +
		"\tpost-up ip route add " + gw + " dev " + ifname + "\n" +
		"\tpost-up ip route add default via " + gw + " dev " + ifname + "\n" +
		"\tpre-down ip route del default via " + gw + " dev " + ifname + "\n" +
		"\tpre-down ip route del " + gw + " dev " + ifname + "\n" +
		"# --- END PVE ---\n"
}

// ctRenderInterfaces is setup_network's rewrite of old (the CT's file,
// "" when it has none) for nets.
func ctRenderInterfaces(old string, nets map[string]*ctNetIface) string {
	r := &ifacesRender{nets: nets, doneAuto: map[string]bool{}, done4: map[string]bool{}, done6: map[string]bool{}}
	if old != "" {
		for _, line := range strings.Split(strings.TrimSuffix(old, "\n"), "\n") {
			r.line(line)
		}
		r.flush()
	}
	r.addMissing()
	text := r.out.String()
	if !r.doneAuto["lo"] {
		text = "auto lo\niface lo inet loopback\niface lo inet6 loopback\n\n" + text
	}
	return text
}

// ifacesRender is one ctRenderInterfaces: the text so far, the
// interfaces whose auto line and inet and inet6 sections are written,
// and the section of ours being read (sec).
type ifacesRender struct {
	nets                   map[string]*ctNetIface
	out                    strings.Builder
	doneAuto, done4, done6 map[string]bool
	sec                    *ifaceSection
}

// ifaceSection is an "iface NAME inet|inet6" section of a netN: the
// attributes kept from the old file.
type ifaceSection struct {
	v6     bool
	ifname string
	attr   []string
}

// line copies one line of the old file, or keeps it for the section of
// ours it belongs to.
func (r *ifacesRender) line(line string) {
	trimmed := strings.TrimSpace(line)
	f := strings.Fields(line)
	switch {
	case strings.HasPrefix(line, "# --- BEGIN PVE ---") || strings.HasPrefix(line, "# --- END PVE ---"):
		if r.sec != nil {
			r.sec.attr = append(r.sec.attr, line)
		}
	case strings.HasPrefix(line, "#"):
		r.out.WriteString(line + "\n")
	case trimmed == "":
		if r.sec != nil {
			r.flush()
		} else {
			r.out.WriteString(line + "\n")
		}
	case len(f) == 4 && f[0] == "iface" && (f[2] == "inet" || f[2] == "inet6"):
		r.flush()
		if r.nets[f[1]] == nil {
			r.out.WriteString(line + "\n")
		} else {
			r.sec = &ifaceSection{v6: f[2] == "inet6", ifname: f[1]}
		}
	case len(f) >= 1 && f[0] == "auto":
		for _, i := range f[1:] {
			r.doneAuto[i] = true
		}
		r.flush()
		r.out.WriteString(line + "\n")
	case len(f) >= 1 && (f[0] == "mapping" || f[0] == "source" || f[0] == "source-directory" || strings.HasPrefix(f[0], "allow-")):
		r.flush()
		r.out.WriteString(line + "\n")
	case r.sec != nil && len(f) >= 2:
		switch f[0] {
		case "address", "netmask", "gateway", "broadcast":
		default:
			r.sec.attr = append(r.sec.attr, trimmed)
		}
	default:
		r.out.WriteString(line + "\n")
	}
}

// addMissing writes, by name, the sections of nets the old file lacked.
func (r *ifacesRender) addMissing() {
	names := make([]string, 0, len(r.nets))
	for name := range r.nets {
		names = append(names, name)
	}
	sort.Strings(names)
	sep := r.out.Len() > 0 && !strings.HasSuffix(r.out.String(), "\n\n")
	for _, name := range names {
		n := r.nets[name]
		if !r.done4[name] && n.has4 {
			if sep {
				r.out.WriteString("\n")
				sep = false
			}
			r.sec = &ifaceSection{ifname: name}
			r.flush()
		}
		if !r.done6[name] && n.has6 {
			if sep {
				r.out.WriteString("\n")
				sep = false
			}
			r.sec = &ifaceSection{v6: true, ifname: name}
			r.flush()
		}
	}
}

// flush writes the section being read, if any: its auto line once, then
// the netN's address, gateway and the kept attributes.
func (r *ifacesRender) flush() {
	if r.sec == nil {
		return
	}
	s := r.sec
	r.sec = nil
	n := r.nets[s.ifname]
	if !r.doneAuto[s.ifname] {
		r.out.WriteString("auto " + s.ifname + "\n")
		r.doneAuto[s.ifname] = true
	}
	addr, cidr, gw, needs, fam := n.addr, n.cidr, n.gw, n.needsRoute, "inet"
	has := n.has4
	if s.v6 {
		addr, cidr, gw, needs, fam, has = n.addr6, n.cidr6, n.gw6, n.needsRoute6, "inet6", n.has6
		r.done6[s.ifname] = true
	} else {
		r.done4[s.ifname] = true
	}
	switch {
	case !has || addr == "":
	case addr == "dhcp" || addr == "manual" || addr == "auto":
		r.out.WriteString("iface " + s.ifname + " " + fam + " " + addr + "\n\n")
	default:
		r.out.WriteString("iface " + s.ifname + " " + fam + " static\n")
		r.out.WriteString("\taddress " + cidr + "\n")
		if gw != "" {
			if needs {
				r.out.WriteString(ctGatewayScripts(s.ifname, gw))
			} else {
				r.out.WriteString("\tgateway " + gw + "\n")
			}
		}
		for _, a := range dropPVEScripts(s.attr) {
			r.out.WriteString("\t" + a + "\n")
		}
		r.out.WriteString("\n")
	}
}

// dropPVEScripts drops PVE's marked scripts from a section's attributes:
// they are written anew.
func dropPVEScripts(attr []string) []string {
	var attrs []string
	skip := false
	for _, a := range attr {
		switch a {
		case "# --- BEGIN PVE ---":
			skip = true
		case "# --- END PVE ---":
			skip = false
		default:
			if !skip {
				attrs = append(attrs, a)
			}
		}
	}
	return attrs
}

// ctSetupInterfaces writes /etc/network/interfaces (nothing when no
// netN has a name and an address setting, as PVE).
func ctSetupInterfaces(rootDir string, conf map[string]string) error {
	nets := ctNetworks(conf)
	if len(nets) == 0 {
		return nil
	}
	const rel = "etc/network/interfaces"
	old, err := ReadCTFile(rootDir, rel)
	if err != nil {
		return err
	}
	return WriteCTFile(rootDir, rel, ctRenderInterfaces(old, nets))
}

// ctHostDNS is the host's search domains and first three nameservers.
func ctHostDNS() (search, nameservers string) {
	data, err := os.ReadFile(hostResolvConf)
	if err != nil {
		return "", ""
	}
	var ns []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "search", "domain":
			search = strings.Join(f[1:], " ")
		case "nameserver":
			if len(ns) < 3 {
				ns = append(ns, f[1])
			}
		}
	}
	return search, strings.Join(ns, " ")
}

// ctSetDNS writes PVE's section of /etc/resolv.conf (set_dns, replace).
func ctSetDNS(rootDir string, conf map[string]string) error {
	search, ns := conf["searchdomain"], conf["nameserver"]
	_, hasSearch := conf["searchdomain"]
	_, hasNS := conf["nameserver"]
	if !hasSearch || !hasNS {
		hs, hns := ctHostDNS()
		if !hasSearch {
			search = hs
		}
		if !hasNS {
			ns = hns
		}
	}
	var data strings.Builder
	if s := ctSplitList(search); len(s) > 0 {
		data.WriteString("search " + strings.Join(s, " ") + "\n")
	}
	for _, n := range ctSplitList(ns) {
		data.WriteString("nameserver " + n + "\n")
	}
	old, err := ReadCTFile(rootDir, "etc/resolv.conf")
	if err != nil {
		return err
	}
	return WriteCTFile(rootDir, "etc/resolv.conf", ctModifyMarked(old, data.String()))
}

// ctModifyMarked is Base's ct_modify_file with replace: data goes into
// the "# --- BEGIN PVE ---" … "# --- END PVE ---" section, which replaces
// the whole file when it has none.
func ctModifyMarked(old, data string) string {
	const head, tail = "# --- BEGIN PVE ---\n", "# --- END PVE ---\n"
	if old == "" {
		if data == "" {
			return ""
		}
		return head + data + tail
	}
	lines := strings.Split(strings.TrimSuffix(old, "\n"), "\n")
	beg, end := -1, -1
	for i, l := range lines {
		if beg < 0 && strings.HasPrefix(strings.ReplaceAll(l, " ", ""), "#---BEGINPVE") {
			beg = i
		} else if beg >= 0 && strings.HasPrefix(strings.ToUpper(strings.ReplaceAll(l, " ", "")), "#---ENDPVE") {
			end = i
			break
		}
	}
	if beg >= 0 && end >= 0 {
		out := append([]string{}, lines[:beg]...)
		out = append(out, strings.TrimSuffix(head+data+tail, "\n"))
		out = append(out, lines[end+1:]...)
		return strings.Join(out, "\n") + "\n"
	}
	if data == "" {
		return old
	}
	return head + data + tail
}
