package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// A guest's firewall (pve-firewall API2/Firewall/VM.pm and Rules.pm
// under /nodes/{node}/lxc/{vmid}/firewall for a CT and
// /nodes/{node}/qemu/{vmid}/firewall for a VM, the same API): its
// options and its ordered rules. Reading needs VM.Audit on /vms/{vmid},
// writing VM.Config.Network.

// GuestKind is a guest's directory under /nodes/{node}: LXC for a
// container, QEMU for a virtual machine.
type GuestKind string

// The guest kinds.
const (
	LXC  GuestKind = "lxc"
	QEMU GuestKind = "qemu"
)

// short is the kind as errors name a guest: "ct" or "vm".
func (k GuestKind) short() string {
	if k == QEMU {
		return "vm"
	}
	return "ct"
}

// fwPath is the path of a guest's firewall, with rest appended.
func fwPath(kind GuestKind, node string, vmid int, rest string) string {
	return pathf("/nodes/%s/"+string(kind)+"/%d/firewall", node, vmid) + rest
}

// FirewallOptions are GET …/firewall/options as raw values, without the
// digest: the booleans come as numbers and are kept as "0"/"1".
type FirewallOptions struct {
	Values map[string]string
	Digest string
}

// GuestFirewallOptions reads a CT's firewall options.
func (c *Client) GuestFirewallOptions(ctx context.Context, kind GuestKind, node string, vmid int) (*FirewallOptions, error) {
	var raw map[string]any
	if _, err := c.call(ctx, http.MethodGet, fwPath(kind, node, vmid, "/options"), nil, &raw); err != nil {
		return nil, fmt.Errorf("%s %d firewall options: %w", kind.short(), vmid, err)
	}
	out := &FirewallOptions{Values: map[string]string{}}
	for k, v := range raw {
		s := scalarString(v)
		if k == "digest" {
			out.Digest = s
			continue
		}
		out.Values[k] = s
	}
	return out, nil
}

// scalarString is a JSON scalar as text: numbers without a fraction as
// integers.
func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		if x {
			return "1"
		}
		return "0"
	}
	return fmt.Sprint(v)
}

// SetGuestFirewallOptions sends PUT …/firewall/options: set gives
// the values to write, del the options to drop; digest (when not "")
// makes PVE refuse the write if the options changed since they were read.
func (c *Client) SetGuestFirewallOptions(ctx context.Context, kind GuestKind, node string, vmid int, set map[string]string, del []string, digest string) error {
	q := url.Values{}
	for k, v := range set {
		q.Set(k, v)
	}
	if len(del) > 0 {
		q.Set("delete", strings.Join(del, ","))
	}
	if digest != "" {
		q.Set("digest", digest)
	}
	if _, err := c.call(ctx, http.MethodPut, fwPath(kind, node, vmid, "/options"), q, nil); err != nil {
		return fmt.Errorf("set %s %d firewall options: %w", kind.short(), vmid, err)
	}
	return nil
}

// FirewallRule is one rule of GET …/firewall/rules, with its position
// and the list's digest.
type FirewallRule struct {
	Pos       int    `json:"pos"`
	Type      string `json:"type"`
	Action    string `json:"action"`
	Macro     string `json:"macro,omitempty"`
	Iface     string `json:"iface,omitempty"`
	Source    string `json:"source,omitempty"`
	Dest      string `json:"dest,omitempty"`
	Proto     string `json:"proto,omitempty"`
	Dport     string `json:"dport,omitempty"`
	Sport     string `json:"sport,omitempty"`
	ICMPType  string `json:"icmp-type,omitempty"`
	Log       string `json:"log,omitempty"`
	Comment   string `json:"comment,omitempty"`
	Enable    int    `json:"enable"`
	IPVersion int    `json:"ipversion,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

// GuestFirewallRules reads a CT's firewall rules, in order.
func (c *Client) GuestFirewallRules(ctx context.Context, kind GuestKind, node string, vmid int) ([]FirewallRule, error) {
	var out []FirewallRule
	if _, err := c.call(ctx, http.MethodGet, fwPath(kind, node, vmid, "/rules"), nil, &out); err != nil {
		return nil, fmt.Errorf("%s %d firewall rules: %w", kind.short(), vmid, err)
	}
	return out, nil
}

// RuleFields are a rule's writable fields by API name, "" for unset.
type RuleFields map[string]string

// CreateGuestFirewallRule sends POST …/firewall/rules. PVE puts the
// new rule first (position 0) whatever pos says; move it with
// MoveContainerFirewallRule.
func (c *Client) CreateGuestFirewallRule(ctx context.Context, kind GuestKind, node string, vmid int, rule RuleFields) error {
	q := url.Values{}
	for k, v := range rule {
		if v != "" {
			q.Set(k, v)
		}
	}
	if _, err := c.call(ctx, http.MethodPost, fwPath(kind, node, vmid, "/rules"), q, nil); err != nil {
		return fmt.Errorf("create %s %d firewall rule: %w", kind.short(), vmid, err)
	}
	return nil
}

// UpdateGuestFirewallRule sends PUT …/firewall/rules/{pos}: the
// non-empty fields are set, the empty ones deleted.
func (c *Client) UpdateGuestFirewallRule(ctx context.Context, kind GuestKind, node string, vmid, pos int, rule RuleFields, digest string) error {
	q := url.Values{}
	var del []string
	for k, v := range rule {
		if v != "" {
			q.Set(k, v)
		} else if k != "type" && k != "action" {
			del = append(del, k)
		}
	}
	if len(del) > 0 {
		q.Set("delete", strings.Join(del, ","))
	}
	if digest != "" {
		q.Set("digest", digest)
	}
	if _, err := c.call(ctx, http.MethodPut, fwPath(kind, node, vmid, "/rules/"+strconv.Itoa(pos)), q, nil); err != nil {
		return fmt.Errorf("update %s %d firewall rule %d: %w", kind.short(), vmid, pos, err)
	}
	return nil
}

// MoveGuestFirewallRule sends PUT …/firewall/rules/{pos} with
// moveto: the rule goes before the rule now at moveto, last past the end.
func (c *Client) MoveGuestFirewallRule(ctx context.Context, kind GuestKind, node string, vmid, pos, moveto int) error {
	q := url.Values{"moveto": {strconv.Itoa(moveto)}}
	if _, err := c.call(ctx, http.MethodPut, fwPath(kind, node, vmid, "/rules/"+strconv.Itoa(pos)), q, nil); err != nil {
		return fmt.Errorf("move %s %d firewall rule %d: %w", kind.short(), vmid, pos, err)
	}
	return nil
}

// DeleteGuestFirewallRule sends DELETE …/firewall/rules/{pos}.
func (c *Client) DeleteGuestFirewallRule(ctx context.Context, kind GuestKind, node string, vmid, pos int, digest string) error {
	var q url.Values
	if digest != "" {
		q = url.Values{"digest": {digest}}
	}
	if _, err := c.call(ctx, http.MethodDelete, fwPath(kind, node, vmid, "/rules/"+strconv.Itoa(pos)), q, nil); err != nil {
		return fmt.Errorf("delete %s %d firewall rule %d: %w", kind.short(), vmid, pos, err)
	}
	return nil
}
