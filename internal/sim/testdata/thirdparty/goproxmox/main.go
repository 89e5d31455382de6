// Command goproxmox drives the emulator with go-proxmox (v0.8.2, pinned by
// this nested module's go.mod, so that corral's own go.mod stays free of
// it). internal/sim/thirdparty_goproxmox_test.go runs it with go run and
// sets PVE_URL, PVE_USER, PVE_TOKEN_ID, PVE_TOKEN_SECRET, PVE_CA (the
// emulator's certificate, which is checked) and PVE_NODE. Each step
// checks what PVE answers; the first deviation exits non-zero naming the
// step. It prints ok at the end.
package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

var step = "start"

// check ends the program when ok is false, naming the step.
func check(ok bool, format string, args ...any) {
	if !ok {
		fmt.Fprintf(os.Stderr, "step %s: %s\n", step, fmt.Sprintf(format, args...))
		os.Exit(1)
	}
}

func must(err error) { check(err == nil, "%v", err) }

// wait waits for a task and checks that it ended OK. Its arguments are
// what a go-proxmox call that starts a task returns.
func wait(task *proxmox.Task, err error) {
	must(err)
	must(task.Wait(context.Background(), 50*time.Millisecond, time.Minute))
	check(task.IsSuccessful, "task %s ended %q", task.UPID, task.ExitStatus)
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := os.Getenv
	c := proxmox.NewClient(env("PVE_URL")+"/api2/json",
		proxmox.WithAPIToken(env("PVE_USER")+"!"+env("PVE_TOKEN_ID"), env("PVE_TOKEN_SECRET")),
		proxmox.WithRootCAFile(env("PVE_CA")))
	node := readCluster(ctx, c, env("PVE_NODE"))
	containers(ctx, c, node)
	firewall(ctx, c, node)
	access(ctx, c)
	lifecycle(ctx, c, node)
	fmt.Println("ok")
}

// readCluster checks the version, nodes, pools and cluster resources.
func readCluster(ctx context.Context, c *proxmox.Client, name string) *proxmox.Node {
	step = "version"
	v, err := c.Version(ctx)
	must(err)
	check(v.Release != "" && v.Version != "", "version %+v", v)

	step = "nodes"
	nodes, err := c.Nodes(ctx)
	must(err)
	check(len(nodes) == 1 && nodes[0].Node == name && nodes[0].Status == "online", "nodes %+v", nodes)
	node, err := c.Node(ctx, name)
	must(err)

	step = "pools"
	pools, err := c.Pools(ctx)
	must(err)
	check(len(pools) == 1 && pools[0].PoolID == "apps", "pools %+v", pools)
	pool, err := c.Pool(ctx, "apps")
	must(err)
	check(len(pool.Members) == 1 && pool.Members[0].VMID == 101 && pool.Members[0].Type == "lxc", "pool apps %+v", pool)

	step = "cluster resources"
	cl, err := c.Cluster(ctx)
	must(err)
	rs, err := cl.Resources(ctx, "vm")
	must(err)
	check(len(rs) == 2 && slices.ContainsFunc(rs, func(r *proxmox.ClusterResource) bool {
		return r.VMID == 101 && r.Status == "running" && r.Pool == "apps" && r.Node == name
	}), "resources %+v", rs)
	return node
}

// containers lists, reads, stops, starts, clones and templates CTs, and
// reads the node's and the cluster's tasks.
func containers(ctx context.Context, c *proxmox.Client, node *proxmox.Node) {
	step = "containers"
	cts, err := node.Containers(ctx)
	must(err)
	check(len(cts) == 2, "containers %+v", cts)
	ct, err := node.Container(ctx, 101)
	must(err)
	check(ct.Status == "running" && ct.ContainerConfig.Hostname == "web1" && ct.ContainerConfig.Memory != nil && *ct.ContainerConfig.Memory == 256,
		"CT 101: %s %+v", ct.Status, ct.ContainerConfig)

	step = "power"
	wait(ct.Stop(ctx))
	ct, err = node.Container(ctx, 101)
	must(err)
	check(ct.Status == "stopped", "CT 101 is %s after stop", ct.Status)
	wait(ct.Start(ctx))

	step = "clone"
	db, err := node.Container(ctx, 102)
	must(err)
	newid, task, err := db.Clone(ctx, &proxmox.ContainerCloneOptions{NewID: 105, Hostname: "db5", Full: true})
	check(newid == 105, "clone answered id %d", newid)
	wait(task, err)

	step = "template"
	clone, err := node.Container(ctx, 105)
	must(err)
	must(clone.Template(ctx))
	for i := 0; i < 600 && !bool(clone.ContainerConfig.Template); i++ {
		time.Sleep(50 * time.Millisecond)
		clone, err = node.Container(ctx, 105)
		must(err)
	}
	check(bool(clone.ContainerConfig.Template), "CT 105 is not a template: %+v", clone.ContainerConfig)

	step = "tasks"
	tasks, err := node.Tasks(ctx, &proxmox.NodeTasksOptions{Limit: 50})
	must(err)
	types := map[string]bool{}
	for _, t := range tasks {
		types[t.Type] = true
	}
	check(types["vzstart"] && types["vzstop"] && types["vzclone"], "task types %v", types)
	cl, err := c.Cluster(ctx)
	must(err)
	ctasks, err := cl.Tasks(ctx)
	must(err)
	check(len(ctasks) > 0, "no cluster tasks")
}
