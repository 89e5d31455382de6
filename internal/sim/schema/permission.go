package schema

import (
	"encoding/json"
	"fmt"
)

// Permission is a method's "permissions" object: who may call it. This
// package only describes it; the HTTP layer evaluates it against the
// access model, the way pve-access-control's RPCEnvironment
// check_api2_permissions does.
type Permission struct {
	// User is "all" (any authenticated user or token), "world" (no
	// credentials needed) or "" (no blanket rule).
	User string `json:"user,omitempty"`
	// Check is the permission expression, nil when the method has none.
	// A method with neither User nor Check is root@pam only.
	Check *Check `json:"check,omitempty"`
}

// Check ops, as PVE spells them in the prefix-notation "check" arrays.
const (
	OpPerm        = "perm"         // ["perm", path, [privs], "any", 1, "require_param", p]
	OpAnd         = "and"          // ["and", check, check, ...]
	OpOr          = "or"           // ["or", check, check, ...]
	OpUseridParam = "userid-param" // ["userid-param", "self" | priv]
	OpUseridGroup = "userid-group" // ["userid-group", [privs], "groups_param", "create"|"update"]
	OpPermModify  = "perm-modify"  // ["perm-modify", path]
)

// Check is one node of a permission expression.
type Check struct {
	Op string
	// Path is the ACL path template of perm and perm-modify, with
	// parameters in braces: "/vms/{vmid}".
	Path string
	// Privs are the privileges of perm and userid-group.
	Privs []string
	// Any: one of Privs suffices (perm "any", 1); otherwise all are needed.
	Any bool
	// RequireParam: perm only applies when this parameter is given
	// (perm "require_param", "pool").
	RequireParam string
	// Param of userid-param: "self" (the userid parameter must be the
	// caller) or a privilege needed on the userid's realm.
	Param string
	// GroupsParam of userid-group: "create" or "update", how the groups
	// parameter is checked.
	GroupsParam string
	// Sub are the operands of and/or.
	Sub []*Check
}

// MarshalJSON writes the check back in PVE's array notation.
func (c *Check) MarshalJSON() ([]byte, error) { return json.Marshal(c.toArray()) }

func (c *Check) toArray() []any {
	switch c.Op {
	case OpAnd, OpOr:
		a := []any{c.Op}
		for _, s := range c.Sub {
			a = append(a, s.toArray())
		}
		return a
	case OpPerm:
		a := []any{c.Op, c.Path, c.Privs}
		if c.Any {
			a = append(a, "any", 1)
		}
		if c.RequireParam != "" {
			a = append(a, "require_param", c.RequireParam)
		}
		return a
	case OpUseridParam:
		return []any{c.Op, c.Param}
	case OpUseridGroup:
		a := []any{c.Op, c.Privs}
		if c.GroupsParam != "" {
			a = append(a, "groups_param", c.GroupsParam)
		}
		return a
	case OpPermModify:
		return []any{c.Op, c.Path}
	}
	return []any{c.Op}
}

// UnmarshalJSON reads PVE's array notation.
func (c *Check) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("permission check: %w", err)
	}
	parsed, err := parseCheck(raw)
	if err != nil {
		return err
	}
	*c = *parsed
	return nil
}

func parseCheck(raw []json.RawMessage) (*Check, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("permission check: empty array")
	}
	var op string
	if err := json.Unmarshal(raw[0], &op); err != nil {
		return nil, fmt.Errorf("permission check: op: %w", err)
	}
	c := &Check{Op: op}
	a := checkArgs{op: op, args: raw[1:]}
	var err error
	switch op {
	case OpAnd, OpOr:
		for _, arg := range a.args {
			var sub []json.RawMessage
			if err := json.Unmarshal(arg, &sub); err != nil {
				return nil, fmt.Errorf("permission check %s: operand: %w", op, err)
			}
			s, err := parseCheck(sub)
			if err != nil {
				return nil, err
			}
			c.Sub = append(c.Sub, s)
		}
		return c, nil
	case OpPerm:
		if c.Path, err = checkArg[string](a, 0); err == nil {
			if c.Privs, err = checkArg[[]string](a, 1); err == nil {
				err = c.permOptions(a, 2)
			}
		}
	case OpUseridParam:
		if c.Param, err = checkArg[string](a, 0); err == nil {
			err = a.only1()
		}
	case OpUseridGroup:
		if c.Privs, err = checkArg[[]string](a, 0); err == nil {
			err = c.groupOptions(a, 1)
		}
	case OpPermModify:
		if c.Path, err = checkArg[string](a, 0); err == nil {
			err = a.only1()
		}
	default:
		return nil, fmt.Errorf("permission check: unknown op %q", op)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// checkArgs are the arguments of a permission check's op.
type checkArgs struct {
	op   string
	args []json.RawMessage
}

// checkArg decodes argument i.
func checkArg[T any](a checkArgs, i int) (T, error) {
	var v T
	if i >= len(a.args) {
		return v, fmt.Errorf("permission check %s: missing argument %d", a.op, i+1)
	}
	if err := json.Unmarshal(a.args[i], &v); err != nil {
		return v, fmt.Errorf("permission check %s: argument %d: %w", a.op, i+1, err)
	}
	return v, nil
}

// only1 fails unless the op has exactly one argument.
func (a checkArgs) only1() error {
	if len(a.args) != 1 {
		return fmt.Errorf("permission check %s: want 1 argument, got %d", a.op, len(a.args))
	}
	return nil
}

// options reads the trailing key/value pairs starting at args[i].
func (a checkArgs) options(i int) (map[string]json.RawMessage, error) {
	opts := map[string]json.RawMessage{}
	if (len(a.args)-i)%2 != 0 {
		return nil, fmt.Errorf("permission check %s: odd option list", a.op)
	}
	for ; i < len(a.args); i += 2 {
		k, err := checkArg[string](a, i)
		if err != nil {
			return nil, err
		}
		opts[k] = a.args[i+1]
	}
	return opts, nil
}

// permOptions reads a perm check's options from args[i]: any and
// require_param.
func (c *Check) permOptions(a checkArgs, i int) error {
	opts, err := a.options(i)
	if err != nil {
		return err
	}
	for k, v := range opts {
		switch k {
		case "any":
			var n json.Number
			if err := json.Unmarshal(v, &n); err != nil || n.String() == "0" {
				return fmt.Errorf("permission check perm: bad any %s", v)
			}
			c.Any = true
		case "require_param":
			if err := json.Unmarshal(v, &c.RequireParam); err != nil {
				return fmt.Errorf("permission check perm: require_param: %w", err)
			}
		default:
			return fmt.Errorf("permission check perm: unknown option %q", k)
		}
	}
	return nil
}

// groupOptions reads a userid-group check's options from args[i]:
// groups_param only.
func (c *Check) groupOptions(a checkArgs, i int) error {
	opts, err := a.options(i)
	if err != nil {
		return err
	}
	for k, v := range opts {
		if k != "groups_param" {
			return fmt.Errorf("permission check userid-group: unknown option %q", k)
		}
		if err := json.Unmarshal(v, &c.GroupsParam); err != nil {
			return fmt.Errorf("permission check userid-group: groups_param: %w", err)
		}
	}
	return nil
}
