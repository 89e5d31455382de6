package ui

import (
	"fmt"
	"io"

	"github.com/corralhq/corral/internal/plan"
)

// PoolJSON is a change's resource pool: the container leaves From (""
// for none) and joins To, which apply creates first when Create is set.
type PoolJSON struct {
	From   string `json:"from,omitempty"`
	To     string `json:"to"`
	Create bool   `json:"create,omitempty"`
}

// FirewallJSON is what apply writes to a container's firewall: option
// edits and rule operations in the order apply carries them out (rule
// positions are those of the list when each operation runs).
type FirewallJSON struct {
	Options []EditJSON     `json:"options,omitempty"`
	Rules   []RuleEditJSON `json:"rules,omitempty"`
}

// RuleEditJSON is one rule operation: update, delete or create at pos,
// with the rule as pve-firewall writes it ("IN ACCEPT -p tcp -dport 80").
type RuleEditJSON struct {
	Op  string `json:"op"`
	Pos int    `json:"pos"`
	Old string `json:"old,omitempty"`
	New string `json:"new,omitempty"`
}

func newPoolJSON(p *plan.PoolChange) *PoolJSON {
	if p == nil {
		return nil
	}
	return &PoolJSON{From: p.From, To: p.To, Create: p.Create}
}

func newFirewallJSON(f *plan.FirewallChange) *FirewallJSON {
	if f.IsZero() {
		return nil
	}
	j := &FirewallJSON{}
	for _, e := range f.Options {
		j.Options = append(j.Options, EditJSON{Key: e.Key, Old: e.Old, New: e.New})
	}
	for _, r := range f.Rules {
		e := RuleEditJSON{Op: string(r.Op), Pos: r.Pos}
		if r.Op != plan.RuleCreate {
			e.Old = r.Old.String()
		}
		if r.Op != plan.RuleDelete {
			e.New = r.Rule.String()
		}
		j.Rules = append(j.Rules, e)
	}
	return j
}

// writePoolAndFirewall prints a change's pool and firewall lines.
func writePoolAndFirewall(w io.Writer, c ChangeJSON) {
	if p := c.Pool; p != nil {
		to := p.To
		if p.Create {
			to += " (created)"
		}
		if p.From == "" {
			fmt.Fprintf(w, "      + pool: %s\n", to)
		} else {
			fmt.Fprintf(w, "      ~ pool: %s → %s\n", p.From, to)
		}
	}
	f := c.Firewall
	if f == nil {
		return
	}
	for _, e := range f.Options {
		fmt.Fprintf(w, "      ~ firewall %s: %s → %s\n", e.Key, quote(e.Old), quote(e.New))
	}
	for _, r := range f.Rules {
		switch r.Op {
		case string(plan.RuleCreate):
			fmt.Fprintf(w, "      + firewall rule %d: %s\n", r.Pos, r.New)
		case string(plan.RuleDelete):
			fmt.Fprintf(w, "      - firewall rule %d: %s\n", r.Pos, r.Old)
		default:
			fmt.Fprintf(w, "      ~ firewall rule %d: %s → %s\n", r.Pos, r.Old, r.New)
		}
	}
}
