package bench

import (
	"strconv"
	"strings"
)

// guestRef is one guest of /cluster/resources?type=vm.
type guestRef struct {
	VMID int    `json:"vmid"`
	Node string `json:"node"`
}

// MixedRound is one round of the mixed read mix (issue 30): the requests
// a refresh by real clients sends, in these proportions. bpg/terraform
// reads a container's status/current and config per resource; Ansible's
// proxmox inventory lists /nodes, each node's /lxc and reads configs and
// status; corral plan lists /cluster/resources?type=vm and reads each
// app's pending config; all of them ask /version and /cluster/status
// once, and the storage content and task list come from status
// commands and task polling. Each round names one container (and its
// node): the per-container reads go to it, the per-node lists to its
// node. The lists come once per round, more often than in a refresh of
// a thousand containers (once for all of them): the mix errs on the
// expensive side. docs/benchmarks.md gives the same table.
var MixedRound = []struct {
	Path   string // {node}, {vmid} and {storage} are filled in per round
	Weight int
}{
	{"/cluster/resources?type=vm", 1},
	{"/nodes", 1},
	{"/nodes/{node}/lxc", 1},
	{"/nodes/{node}/lxc/{vmid}/status/current", 5},
	{"/nodes/{node}/lxc/{vmid}/config", 5},
	{"/nodes/{node}/lxc/{vmid}/pending", 3},
	{"/nodes/{node}/storage/{storage}/content", 1},
	{"/nodes/{node}/tasks", 1},
	{"/cluster/status", 1},
	{"/version", 1},
}

// mixedPaths expands MixedRound once per guest (up to rounds rounds,
// the guests taken in turn), each path under /api2/json; storage is the
// storage whose content the rounds list.
func mixedPaths(guests []guestRef, storage string, rounds int) []string {
	var out []string
	for i := 0; i < rounds && len(guests) > 0; i++ {
		g := guests[i%len(guests)]
		for _, e := range MixedRound {
			r := strings.NewReplacer("{node}", g.Node, "{vmid}", strconv.Itoa(g.VMID), "{storage}", storage)
			p := "/api2/json" + r.Replace(e.Path)
			for range e.Weight {
				out = append(out, p)
			}
		}
	}
	return out
}
