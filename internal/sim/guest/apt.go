package guest

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"

	"github.com/corralhq/corral/internal/sim/aptproxy"
	"github.com/corralhq/corral/internal/sim/model"
)

// Package sources for CTs. An isolated CT reaches nothing outside its
// bridge, so the emulator runs aptproxy on the bridge gateway,
// GatewayIP:aptproxy.Port, forwarding only to the host's own package
// sources, and points the apt of every CT with a system of its own (a
// real template) at it.
//
// The apt setting is written at each start, not at create or into the
// template: the proxy is a property of this emulator run (there is none
// in the fallback view, where CTs share the host's network, nor when the
// host has no http(s) source), so a start writes it when the proxy
// serves and removes it when not. It is a file of its own, aptConfFile,
// which a CT's other apt settings do not touch.

// aptConfFile is the CT's apt setting, relative to its root.
const aptConfFile = "etc/apt/apt.conf.d/00corral-sim-proxy"

// startAptProxy serves the proxy for sources (nil: the host's own) on the
// bridge. Without one, CTs' apt fails to reach any mirror, which is said
// once here.
func (m *Manager) startAptProxy(sources []string) {
	if m.rt == nil || m.rt.net == nil {
		return
	}
	if sources == nil {
		var err error
		if sources, err = aptproxy.HostSources("/"); err != nil {
			m.log.Warn("no package sources for CTs", "err", err)
			return
		}
	}
	p, err := aptproxy.New(sources, m.log.WithGroup("apt"))
	if err != nil {
		m.log.Warn("no package sources for CTs: apt-get inside them fails", "err", err)
		return
	}
	ln, err := m.rt.net.listen(net.JoinHostPort(GatewayIP, strconv.Itoa(aptproxy.Port)))
	if err != nil {
		m.log.Warn("no package sources for CTs: apt-get inside them fails", "err", err)
		return
	}
	m.rt.net.mu.Lock()
	m.rt.net.lns = append(m.rt.net.lns, ln)
	m.rt.net.mu.Unlock()
	m.aptProxy = "http://" + ln.Addr().String()
	m.apt = p
	m.log.Debug("apt proxy for CTs", "addr", ln.Addr().String(), "sources", p.Sources())
	go p.Serve(ln)
}

// setAptProxy writes (or, without a proxy, removes) the CT's apt setting
// in root before it boots.
func (m *Manager) setAptProxy(root string) error {
	// Checked and removed from the rootfs's descriptor down: a link on
	// the way (etc -> /etc) never reaches the host's files.
	if !model.CTDirExists(root, "etc/apt") {
		return nil // no apt here (or a link the emulator does not follow)
	}
	if !hasOwnSystem(root) {
		return nil // the tiny template's apt is the host's
	}
	if !model.CTDirExists(root, filepath.Dir(aptConfFile)) {
		return nil // no apt in this CT
	}
	if m.aptProxy == "" {
		return model.RemoveCTFile(root, aptConfFile)
	}
	text := fmt.Sprintf(`// Written by corral's PVE emulator at each start of this CT: apt reaches
// the host's package sources through the emulator's proxy on the bridge.
Acquire::http::Proxy %q;
Acquire::https::Proxy %q;
`, m.aptProxy, m.aptProxy)
	return writeCTFile(root, aptConfFile, text)
}
