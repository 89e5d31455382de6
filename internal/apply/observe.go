package apply

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// resource is the part of a /cluster/resources entry corral reads.
type resource struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Node   string `json:"node"`
	VMID   int    `json:"vmid"`
	Status string `json:"status"`
	Tags   string `json:"tags"`
	Lock   string `json:"lock"`
	Name   string `json:"name"`
}

type storageEntry struct {
	Storage string `json:"storage"`
	Type    string `json:"type"`
	Content string `json:"content"`
	Active  int    `json:"active"`
	Total   int64  `json:"total"`
	Avail   int64  `json:"avail"`
}

type contentEntry struct {
	VolID   string `json:"volid"`
	Size    int64  `json:"size"`
	Content string `json:"content"`
	VMID    int    `json:"vmid"`
}

// Observe reads what corral needs from the cluster, with a number of
// requests that grows with corral's own containers and the node count,
// not with the rest of the cluster: the node list, one cluster resources
// call, the config of each corral CT, and per node the storage list and
// the content of the storages that hold templates and volumes.
func Observe(ctx context.Context, c *pve.Client) (*plan.Observed, error) {
	obs := &plan.Observed{
		Templates: map[string][]string{},
		Apps:      map[string][]*plan.CT{},
		Keepers:   map[string]*plan.Keeper{},
		Volumes:   map[string]int64{},
	}
	var nodes []struct {
		Node   string `json:"node"`
		Status string `json:"status"`
	}
	if err := c.Get(ctx, "/nodes", nil, &nodes); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range nodes {
		obs.Nodes = append(obs.Nodes, n.Node)
	}
	sort.Strings(obs.Nodes)

	var res []resource
	if err := c.Get(ctx, "/cluster/resources", url.Values{"type": {"vm"}}, &res); err != nil {
		return nil, fmt.Errorf("list guests: %w", err)
	}
	for _, r := range res {
		if r.Type != "lxc" {
			continue
		}
		tags := plan.ParseTags(r.Tags)
		if !slices.Contains(tags, plan.TagManaged) {
			continue
		}
		conf, err := containerConfig(ctx, c, r.Node, r.VMID)
		if err != nil {
			if pve.IsNotFound(err) {
				continue // destroyed between the two calls
			}
			return nil, err
		}
		if slices.Contains(tags, plan.TagKeeper) {
			if prev := obs.Keepers[r.Node]; prev != nil && prev.VMID < r.VMID {
				continue // two keepers: the older one wins, the other is reported by status
			}
			obs.Keepers[r.Node] = &plan.Keeper{
				VMID: r.VMID, Node: r.Node, Protected: conf["protection"] == "1", Config: conf,
				Records: plan.ParseKeeperRecords(conf["description"]),
			}
			continue
		}
		app := appOf(tags)
		if app == "" {
			continue
		}
		obs.Apps[app] = append(obs.Apps[app], &plan.CT{VMID: r.VMID, Node: r.Node, Status: r.Status, Lock: conf["lock"], Config: conf})
	}

	for _, node := range obs.Nodes {
		var storages []storageEntry
		if err := c.Get(ctx, "/nodes/"+node+"/storage", nil, &storages); err != nil {
			return nil, fmt.Errorf("list storages on %s: %w", node, err)
		}
		for _, s := range storages {
			cts := strings.Split(s.Content, ",")
			wantTmpl := slices.Contains(cts, "vztmpl")
			wantImg := slices.Contains(cts, "rootdir") || slices.Contains(cts, "images")
			if !wantTmpl && !wantImg {
				continue
			}
			var content []contentEntry
			if err := c.Get(ctx, "/nodes/"+node+"/storage/"+s.Storage+"/content", nil, &content); err != nil {
				return nil, fmt.Errorf("list %s on %s: %w", s.Storage, node, err)
			}
			for _, e := range content {
				switch e.Content {
				case "vztmpl":
					obs.Templates[node] = append(obs.Templates[node], e.VolID)
				case "images", "rootdir":
					obs.Volumes[node+"/"+e.VolID] = e.Size
				}
			}
		}
	}
	return obs, nil
}

// appOf returns the app name from a corral-app-<name> tag.
func appOf(tags []string) string {
	for _, t := range tags {
		if name, ok := strings.CutPrefix(t, plan.TagAppPrefix); ok {
			return name
		}
	}
	return ""
}

// containerConfig reads the active config (current=1) as raw strings.
func containerConfig(ctx context.Context, c *pve.Client, node string, vmid int) (map[string]string, error) {
	var raw map[string]any
	if err := c.Get(ctx, fmt.Sprintf("/nodes/%s/lxc/%d/config", node, vmid), url.Values{"current": {"1"}}, &raw); err != nil {
		return nil, fmt.Errorf("read config of ct %d: %w", vmid, err)
	}
	conf := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			conf[k] = v
		case float64:
			conf[k] = strconv.FormatFloat(v, 'f', -1, 64)
		case bool:
			conf[k] = map[bool]string{true: "1", false: "0"}[v]
		}
	}
	return conf, nil
}
