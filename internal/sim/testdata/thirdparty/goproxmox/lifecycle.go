package main

import (
	"context"
	"slices"

	proxmox "github.com/luthermonson/go-proxmox"
)

// lifecycle reads the node and its storage, changes a CT's config and
// tags, snapshots it, reads a running CT's interfaces, removes IP set
// entries and sets, and destroys a CT.
func lifecycle(ctx context.Context, c *proxmox.Client, node *proxmox.Node) {
	step = "node"
	nv, err := node.Version(ctx)
	must(err)
	v, err := c.Version(ctx)
	must(err)
	check(nv.Version == v.Version && nv.Release == v.Release && nv.RepoID == v.RepoID, "node version %+v, /version %+v", nv, v)
	must(node.Status(ctx))
	check(node.CPUInfo.CPUs > 0 && node.Memory.Total > 0, "node status %+v", node)
	storages, err := node.Storages(ctx)
	must(err)
	check(slices.ContainsFunc(storages, func(s *proxmox.Storage) bool { return s.Name == "local-lvm" && s.Enabled == 1 }),
		"storages %+v", storages)
	cl, err := c.Cluster(ctx)
	must(err)
	next, err := cl.NextID(ctx)
	must(err)
	check(next == 100, "next id %d, want 100 (the first free one)", next)

	step = "config and tags"
	ct, err := node.Container(ctx, 102)
	must(err)
	synchronous(ct.Config(ctx, proxmox.ContainerOption{Name: "memory", Value: 768}, proxmox.ContainerOption{Name: "description", Value: "the database"}))
	ct, err = node.Container(ctx, 102)
	must(err)
	synchronous(ct.AddTag(ctx, "db"))
	ct, err = node.Container(ctx, 102)
	must(err)
	check(*ct.ContainerConfig.Memory == 768 && ct.ContainerConfig.Description == "the database\n" && ct.HasTag("db"),
		"CT 102 config %+v", ct.ContainerConfig)

	step = "snapshots"
	wait(ct.NewSnapshot(ctx, "before"))
	snaps, err := ct.Snapshots(ctx)
	must(err)
	check(len(snaps) == 2 && snaps[0].Name != "", "snapshots %+v", snaps)

	step = "interfaces"
	web, err := node.Container(ctx, 101)
	must(err)
	ifaces, err := web.Interfaces(ctx)
	must(err)
	check(slices.ContainsFunc(ifaces, func(i *proxmox.ContainerInterface) bool { return i.Name == "lo" }), "interfaces %+v", ifaces)

	step = "ipset removal"
	must(web.DeleteFirewallIPSetEntry(ctx, "peers", "192.168.20.0/24", ""))
	entries, err := web.GetFirewallIPSetEntries(ctx, "peers")
	must(err)
	check(len(entries) == 1 && entries[0].CIDR == "backup", "entries %+v", entries)
	must(cl.FirewallIPSetDelete(ctx, "trusted", false))

	step = "destroy"
	db, err := node.Container(ctx, 105)
	must(err)
	wait(db.Delete(ctx, nil))
	cts, err := node.Containers(ctx)
	must(err)
	check(len(cts) == 2, "containers after the delete %+v", cts)
}

// synchronous checks a config change that PVE makes at once: for a CT,
// PUT .../config answers null, so go-proxmox's Config returns no task.
func synchronous(task *proxmox.Task, err error) {
	must(err)
	if task != nil {
		check(false, "a CT's config change answered a task %s; PVE's LXC update_vm returns null", task.UPID)
	}
}
