package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/pve"
)

// The installed agent is reached, and its view of the API is checked,
// through the SSH login corral already has to its container: a
// direct-tcpip channel (what ssh -L uses) connects from inside the
// container. So the agent's port needs no opening to the network, and
// what install checks is what the agent itself will see.

// agentEndpoint is the API endpoint the agent uses from inside its
// container. A non-loopback endpoint is kept: a container reaches its
// node as the user does. A loopback one (the local emulator's, an
// SSH tunnel's) means the container's own loopback there, so the
// container's default gateway is tried next, on the endpoint's port and
// on PVE's 8006 (a container on PVE's bridge reaches its node there; the
// emulator serves its API at its bridge's gateway). Each candidate must
// answer GET /version with the same trust settings and token the agent
// gets, from inside the container.
func agentEndpoint(ctx context.Context, cl *guest.Client, cf connFlags) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(cf.endpoint, "/"))
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("endpoint %q: not a URL", cf.endpoint)
	}
	if !isLoopbackHost(u.Hostname()) {
		return cf.endpoint, nil
	}
	candidates := []string{u.Host}
	gw, gerr := guestGateway(ctx, cl)
	if gerr == nil {
		ports := []string{u.Port(), "8006"}
		if ports[0] == "" || ports[0] == "8006" {
			ports = ports[1:]
		}
		for _, p := range ports {
			candidates = append(candidates, net.JoinHostPort(gw, p))
		}
	}
	var tried []string
	for _, host := range candidates {
		c := *u
		c.Host = host
		ep := c.String()
		err := checkEndpointFromGuest(ctx, cl.DialContext, cf, ep)
		if err == nil {
			return ep, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", ep, err))
	}
	if gerr != nil {
		tried = append(tried, "no default gateway in the container: "+gerr.Error())
	}
	return "", fmt.Errorf("the agent cannot reach the API from inside its container (%s is its own loopback there); tried:\n  %s\npass --agent-endpoint with an address of the node the container reaches, e.g. --agent-endpoint https://<node address>:8006",
		cf.endpoint, strings.Join(tried, "\n  "))
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// checkEndpointFromGuest calls GET /version at ep through dial (from
// inside the guest: the SSH login's DialContext), trusting the
// certificate as every other API call of this corral (connFlags.pveConfig).
// agent install refuses --insecure and --insecure-plain-http before
// this runs: the agent would keep them.
func checkEndpointFromGuest(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), cf connFlags, ep string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// One connection attempt first: the client retries a refused
	// connection, and most candidates are refused.
	u, err := url.Parse(ep)
	if err != nil {
		return err
	}
	probe, err := dial(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	probe.Close()
	c, err := pve.New(cf.pveConfig(ep, dial, slog.New(slog.DiscardHandler)))
	if err != nil {
		return err
	}
	_, err = c.Version(ctx)
	return err
}

// guestGateway reads the guest's IPv4 default gateway from
// /proc/net/route (every Linux guest has it; ip(8) may be missing).
func guestGateway(ctx context.Context, cl *guest.Client) (string, error) {
	var out bytes.Buffer
	if err := cl.Pipe(ctx, guest.Pipe{Script: "cat /proc/net/route", Stdout: &out}); err != nil {
		return "", err
	}
	return parseDefaultGateway(out.String())
}

// parseDefaultGateway finds the default route (destination 00000000) of
// a /proc/net/route table; its gateway is hex in host (little-endian)
// byte order.
func parseDefaultGateway(table string) (string, error) {
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[1] != "00000000" {
			continue
		}
		v, err := strconv.ParseUint(f[2], 16, 32)
		if err != nil || v == 0 {
			continue
		}
		return net.IPv4(byte(v), byte(v>>8), byte(v>>16), byte(v>>24)).String(), nil
	}
	return "", errors.New("no default route")
}
