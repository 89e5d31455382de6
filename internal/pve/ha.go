package pve

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// HA resources and rules (pve-ha-manager API2/HA/Resources.pm,
// Rules.pm). Reads need Sys.Audit on /, writes Sys.Console on /.

// HAResource is one entry of GET /cluster/ha/resources: what
// resources.cfg holds for it. Unset fields are zero (PVE applies its
// defaults, state started, max_restart 1, max_relocate 1, elsewhere).
type HAResource struct {
	SID         string       `json:"sid"`
	Type        string       `json:"type"`
	State       string       `json:"state,omitempty"`
	Group       string       `json:"group,omitempty"`
	Comment     string       `json:"comment,omitempty"`
	MaxRestart  *IntOrString `json:"max_restart,omitempty"`
	MaxRelocate *IntOrString `json:"max_relocate,omitempty"`
	Digest      string       `json:"digest,omitempty"`
}

// VMID is the guest a "ct:<vmid>" or "vm:<vmid>" resource names, 0 for
// another kind.
func (r HAResource) VMID() int {
	_, id, ok := strings.Cut(r.SID, ":")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(id)
	return n
}

// HASID is the HA resource id of guest vmid of kind: "ct:<vmid>" for a
// container, "vm:<vmid>" for a virtual machine.
func HASID(kind GuestKind, vmid int) string { return kind.short() + ":" + strconv.Itoa(vmid) }

// HAResources returns GET /cluster/ha/resources.
func (c *Client) HAResources(ctx context.Context) ([]HAResource, error) {
	var out []HAResource
	if err := c.Get(ctx, "/cluster/ha/resources", nil, &out); err != nil {
		return nil, fmt.Errorf("HA resources: %w", err)
	}
	return out, nil
}

// HAResourceSpec is what corral sets on an HA resource. Group is PVE 8's
// (9.x refuses it: its groups became rules).
type HAResourceSpec struct {
	State       string
	Group       string
	MaxRestart  int
	MaxRelocate int
}

func (s HAResourceSpec) values() url.Values {
	q := url.Values{"state": {s.State}, "max_restart": {strconv.Itoa(s.MaxRestart)}, "max_relocate": {strconv.Itoa(s.MaxRelocate)}}
	if s.Group != "" {
		q.Set("group", s.Group)
	}
	return q
}

// AddHAResource is POST /cluster/ha/resources for the guest sid names
// (HASID).
func (c *Client) AddHAResource(ctx context.Context, sid string, s HAResourceSpec) error {
	q := s.values()
	q.Set("sid", sid)
	if err := c.Post(ctx, "/cluster/ha/resources", q, nil); err != nil {
		return fmt.Errorf("add %s to HA: %w", sid, err)
	}
	return nil
}

// UpdateHAResource is PUT /cluster/ha/resources/{sid}; an empty Group
// is deleted rather than set.
func (c *Client) UpdateHAResource(ctx context.Context, sid string, s HAResourceSpec, hadGroup bool) error {
	q := s.values()
	if s.Group == "" && hadGroup {
		q.Set("delete", "group")
	}
	if err := c.Put(ctx, pathf("/cluster/ha/resources/%s", sid), q, nil); err != nil {
		return fmt.Errorf("update HA resource %s: %w", sid, err)
	}
	return nil
}

// SetHAState is PUT /cluster/ha/resources/{sid} state=state: what
// start and stop of an HA-managed guest come down to.
func (c *Client) SetHAState(ctx context.Context, sid string, state string) error {
	if err := c.Put(ctx, pathf("/cluster/ha/resources/%s", sid), url.Values{"state": {state}}, nil); err != nil {
		return fmt.Errorf("set %s's HA state to %s: %w", sid, state, err)
	}
	return nil
}

// DeleteHAResource is DELETE /cluster/ha/resources/{sid}: the guest is
// no longer HA-managed (PVE 9 also drops it from its rules).
func (c *Client) DeleteHAResource(ctx context.Context, sid string) error {
	if err := c.Delete(ctx, pathf("/cluster/ha/resources/%s", sid), nil, nil); err != nil {
		return fmt.Errorf("remove %s from HA: %w", sid, err)
	}
	return nil
}

// HARule is one entry of GET /cluster/ha/rules (PVE 9).
type HARule struct {
	Rule      string `json:"rule"`
	Type      string `json:"type"`
	Resources string `json:"resources"`
	Nodes     string `json:"nodes,omitempty"`
	Strict    Bool01 `json:"strict,omitempty"`
	Disable   Bool01 `json:"disable,omitempty"`
	Digest    string `json:"digest,omitempty"`
}

// ResourceList is the rule's resources, one sid each.
func (r HARule) ResourceList() []string {
	return strings.FieldsFunc(r.Resources, func(c rune) bool { return c == ',' || c == ';' || c == ' ' })
}

// HARules returns GET /cluster/ha/rules (PVE 9; PVE 8 answers 501).
func (c *Client) HARules(ctx context.Context) ([]HARule, error) {
	var out []HARule
	if err := c.Get(ctx, "/cluster/ha/rules", nil, &out); err != nil {
		return nil, fmt.Errorf("HA rules: %w", err)
	}
	return out, nil
}

// SetHARuleResources is PUT /cluster/ha/rules/{rule} resources=… with
// the digest the rule was read with (PVE refuses the write when another
// client changed the rules since).
func (c *Client) SetHARuleResources(ctx context.Context, rule, typ string, resources []string, digest string) error {
	q := url.Values{"type": {typ}, "resources": {strings.Join(resources, ",")}}
	if digest != "" {
		q.Set("digest", digest)
	}
	if err := c.Put(ctx, pathf("/cluster/ha/rules/%s", rule), q, nil); err != nil {
		return fmt.Errorf("set HA rule %s's resources: %w", rule, err)
	}
	return nil
}
