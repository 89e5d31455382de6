package main

import (
	"context"

	proxmox "github.com/luthermonson/go-proxmox"
)

// firewall sets a CT's firewall options, aliases, an IP set and a rule,
// and the cluster's aliases and IP sets.
func firewall(ctx context.Context, c *proxmox.Client, node *proxmox.Node) {
	step = "firewall options"
	ct, err := node.Container(ctx, 101)
	must(err)
	must(ct.UpdateFirewallOptions(ctx, &proxmox.FirewallVirtualMachineOption{Enable: true, PolicyIn: "DROP"}))
	opts, err := ct.GetFirewallOptions(ctx)
	must(err)
	check(bool(opts.Enable) && opts.PolicyIn == "DROP", "options %+v", opts)

	step = "cluster aliases and ipsets"
	cl, err := c.Cluster(ctx)
	must(err)
	must(cl.NewFirewallAlias(ctx, &proxmox.FirewallAliasCreateOption{Name: "mgmt", CIDR: "192.168.10.0/24"}))
	aliases, err := cl.FirewallAliases(ctx)
	must(err)
	check(len(aliases) == 1 && aliases[0].Name == "mgmt" && aliases[0].Cidr == "192.168.10.0/24", "aliases %+v", aliases[0])
	must(cl.NewFirewallIPSet(ctx, &proxmox.FirewallIPSetCreationOption{Name: "trusted"}))
	sets, err := cl.FirewallIPSets(ctx)
	must(err)
	check(len(sets) == 1 && sets[0].Name == "trusted" && sets[0].Digest != "", "ipsets %+v", sets)

	step = "CT aliases and ipsets"
	must(ct.NewFirewallAlias(ctx, &proxmox.FirewallAlias{Name: "backup", Cidr: "192.168.20.4"}))
	a, err := ct.GetFirewallAlias(ctx, "backup")
	must(err)
	check(a.Cidr == "192.168.20.4", "alias %+v", a)
	must(ct.NewFirewallIPSet(ctx, proxmox.FirewallIPSetCreationOption{Name: "peers", Comment: "replicas"}))
	must(ct.NewFirewallIPSetEntry(ctx, "peers", proxmox.FirewallIPSetEntryCreationOption{CIDR: "192.168.20.0/24"}))
	must(ct.NewFirewallIPSetEntry(ctx, "peers", proxmox.FirewallIPSetEntryCreationOption{CIDR: "backup", Comment: "the backup host"}))
	entries, err := ct.GetFirewallIPSetEntries(ctx, "peers")
	must(err)
	check(len(entries) == 2, "entries %+v", entries)
	e, err := ct.GetFirewallIPSetEntry(ctx, "peers", "backup")
	must(err)
	check(e.Comment == "the backup host", "entry %+v", e)

	step = "rules"
	must(ct.NewFirewallRule(ctx, &proxmox.FirewallRule{Type: "in", Action: "ACCEPT", Source: "+peers", Proto: "tcp", Dport: "5432", Enable: 1}))
	rules, err := ct.FirewallRules(ctx)
	must(err)
	check(len(rules) == 1 && rules[0].Source == "+peers" && rules[0].Dport == "5432", "rules %+v", rules)
	refs, err := ct.FirewallRefs(ctx)
	must(err)
	check(len(refs) == 4, "refs %+v", refs)
}
