package apply

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Address returns the IPv4 address of a container's eth0 (net0): the
// static address from its config, or for DHCP the one the running
// container reports (GET .../interfaces). It returns "" for a stopped
// DHCP container, which has no address yet.
func Address(ctx context.Context, c *pve.Client, ct *plan.CT) (string, error) {
	ip := propValue(ct.Config["net0"], "ip")
	if ip != "" && ip != "dhcp" && ip != "manual" {
		if p, err := netip.ParsePrefix(ip); err == nil {
			return p.Addr().String(), nil
		}
		return ip, nil
	}
	if ct.Status != "running" {
		return "", nil
	}
	ifaces, err := c.Interfaces(ctx, ct.Node, ct.VMID)
	if err != nil {
		return "", fmt.Errorf("read addresses of ct %d: %w", ct.VMID, err)
	}
	name := propValue(ct.Config["net0"], "name")
	if name == "" {
		name = "eth0"
	}
	for _, i := range ifaces {
		if i.Name == name && i.Inet != "" {
			if p, err := netip.ParsePrefix(i.Inet); err == nil {
				return p.Addr().String(), nil
			}
			return i.Inet, nil
		}
	}
	return "", nil
}

// propValue reads key=value from a PVE property string.
func propValue(s, key string) string {
	for _, item := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(item, "="); ok && k == key {
			return v
		}
	}
	return ""
}
