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

// HASID is the HA resource id of CT vmid.
func HASID(vmid int) string { return "ct:" + strconv.Itoa(vmid) }

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

// AddHAResource is POST /cluster/ha/resources for CT vmid.
func (c *Client) AddHAResource(ctx context.Context, vmid int, s HAResourceSpec) error {
	q := s.values()
	q.Set("sid", HASID(vmid))
	if err := c.Post(ctx, "/cluster/ha/resources", q, nil); err != nil {
		return fmt.Errorf("add CT %d to HA: %w", vmid, err)
	}
	return nil
}

// UpdateHAResource is PUT /cluster/ha/resources/ct:<vmid>; an empty
// Group is deleted rather than set.
func (c *Client) UpdateHAResource(ctx context.Context, vmid int, s HAResourceSpec, hadGroup bool) error {
	q := s.values()
	if s.Group == "" && hadGroup {
		q.Set("delete", "group")
	}
	if err := c.Put(ctx, pathf("/cluster/ha/resources/%s", HASID(vmid)), q, nil); err != nil {
		return fmt.Errorf("update CT %d's HA resource: %w", vmid, err)
	}
	return nil
}

// SetHAState is PUT /cluster/ha/resources/ct:<vmid> state=state: what
// start and stop of an HA-managed CT come down to.
func (c *Client) SetHAState(ctx context.Context, vmid int, state string) error {
	if err := c.Put(ctx, pathf("/cluster/ha/resources/%s", HASID(vmid)), url.Values{"state": {state}}, nil); err != nil {
		return fmt.Errorf("set CT %d's HA state to %s: %w", vmid, state, err)
	}
	return nil
}

// DeleteHAResource is DELETE /cluster/ha/resources/ct:<vmid>: CT vmid is
// no longer HA-managed (PVE 9 also drops it from its rules).
func (c *Client) DeleteHAResource(ctx context.Context, vmid int) error {
	if err := c.Delete(ctx, pathf("/cluster/ha/resources/%s", HASID(vmid)), nil, nil); err != nil {
		return fmt.Errorf("remove CT %d from HA: %w", vmid, err)
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
