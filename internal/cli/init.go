package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/lazyre"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/ui"
)

// found is one thing init discovered (a storage, bridge or template) and
// the online nodes that have it.
type found struct {
	name    string
	kind    string // a storage's type: lvmthin, dir, zfspool, …
	content string // a storage's content: rootdir,images
	nodes   []string
}

// clusterFacts is what init discovers through the API.
type clusterFacts struct {
	online, offline []string
	// storages are those that hold root file systems or volumes
	// (rootdir or images content); templates are the CT templates of
	// the vztmpl storages.
	storages, bridges, templates []found
}

// add records that node has e.
func add(list *[]found, e found, node string) {
	for i := range *list {
		if (*list)[i].name == e.name {
			(*list)[i].nodes = append((*list)[i].nodes, node)
			return
		}
	}
	e.nodes = []string{node}
	*list = append(*list, e)
}

// discover reads the cluster's online nodes and, on each, its storages,
// bridges and CT templates.
func discover(ctx context.Context, c *pve.Client) (*clusterFacts, error) {
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	f := &clusterFacts{}
	for _, n := range nodes {
		if n.Status != "online" {
			f.offline = append(f.offline, n.Node)
			continue
		}
		f.online = append(f.online, n.Node)
		storages, err := c.StorageList(ctx, n.Node, "")
		if err != nil {
			return nil, err
		}
		for _, s := range storages {
			if s.HasContent("rootdir") || s.HasContent("images") {
				add(&f.storages, found{name: s.Storage, kind: s.Type, content: s.Content}, n.Node)
			}
			if !s.HasContent("vztmpl") {
				continue
			}
			vols, err := c.StorageContent(ctx, n.Node, s.Storage, "vztmpl", 0)
			if err != nil {
				return nil, err
			}
			for _, v := range vols {
				add(&f.templates, found{name: v.VolID}, n.Node)
			}
		}
		bridges, err := c.Bridges(ctx, n.Node)
		if err != nil {
			return nil, err
		}
		for _, b := range bridges {
			add(&f.bridges, found{name: b}, n.Node)
		}
	}
	slices.Sort(f.online)
	slices.Sort(f.offline)
	return f, nil
}

// pick is the entry of list on the most nodes that ok accepts: prefer's
// entry on a tie, else the first by name; ok nil accepts all.
func pick(list []found, prefer func(string) bool, ok func(found) bool) (found, bool) {
	var best found
	var got bool
	for _, e := range list {
		switch {
		case ok != nil && !ok(e):
		case !got, len(e.nodes) > len(best.nodes),
			len(e.nodes) == len(best.nodes) && (prefer(e.name) && !prefer(best.name) ||
				prefer(e.name) == prefer(best.name) && e.name < best.name):
			best, got = e, true
		}
	}
	return best, got
}

// debianRE matches the names of PVE's Debian templates, which init
// prefers (corral's examples and tests use Debian 12).
var debianRE = lazyre.New(`/debian-\d+-standard_`)

// chosen is what the written app uses.
type chosen struct{ template, storage, bridge found }

// choose picks the app's template, root storage and bridge: each the one
// on the most nodes, PVE's defaults (local-lvm, vmbr0) and Debian first.
func choose(f *clusterFacts) (chosen, error) {
	var ch chosen
	var ok bool
	if len(f.online) == 0 {
		return ch, fmt.Errorf("no node is online (offline: %s): start one, then run corral init again", strings.Join(f.offline, ", "))
	}
	if ch.template, ok = pick(f.templates, debianRE.MatchString, nil); !ok {
		return ch, errors.New("no CT template on any storage with vztmpl content: download one (Datacenter > local > CT Templates > Templates, or pveam download local debian-12-standard_12.12-1_amd64.tar.zst), then run corral init again")
	}
	rootdir := func(e found) bool { return slices.Contains(strings.Split(e.content, ","), "rootdir") }
	if ch.storage, ok = pick(f.storages, func(s string) bool { return s == "local-lvm" }, rootdir); !ok {
		return ch, errors.New("no storage with rootdir content, where a container's root file system goes: add rootdir to a storage's content (Datacenter > Storage > Edit > Content), then run corral init again")
	}
	if ch.bridge, ok = pick(f.bridges, func(s string) bool { return s == "vmbr0" }, nil); !ok {
		return ch, errors.New("no network bridge this token can use on any node: create one (System > Network > Create > Linux Bridge), or grant the token SDN.Use on it, then run corral init again")
	}
	return ch, nil
}

// initDoc is the corral.yaml init writes, as a value: the encoder quotes
// every name the cluster gave it, so that none can misread or break the
// document (as the agent's own manifest is built, agent.ManifestText).
type initDoc struct {
	Apps []initApp `yaml:"apps"`
}

type initApp struct {
	Name     string          `yaml:"name"`
	Template string          `yaml:"template"`
	Node     string          `yaml:"node,omitempty"`
	Cores    int             `yaml:"cores"`
	Memory   int             `yaml:"memory"`
	RootFS   initRootFS      `yaml:"rootfs"`
	Features map[string]bool `yaml:"features"`
	Network  initNetwork     `yaml:"network"`
	Volumes  []initVolume    `yaml:"volumes"`
}

type initRootFS struct {
	Storage string `yaml:"storage"`
	Size    string `yaml:"size"`
}

type initNetwork struct {
	Bridge string `yaml:"bridge"`
	IP     string `yaml:"ip"`
}

type initVolume struct {
	Name    string `yaml:"name"`
	Storage string `yaml:"storage"`
	Size    string `yaml:"size"`
	Mount   string `yaml:"mount"`
}

// initManifest is the corral.yaml init writes (before manifest.Format):
// the cluster it found, in comments, and one app on the chosen template,
// storage and bridge, pinned to the template's node when not every
// online node has it.
func initManifest(endpoint string, f *clusterFacts, ch chosen) (string, error) {
	app := initApp{
		Name: "app", Template: ch.template.name, Cores: 1, Memory: 512,
		RootFS:   initRootFS{Storage: ch.storage.name, Size: "4G"},
		Features: map[string]bool{"nesting": true},
		Network:  initNetwork{Bridge: ch.bridge.name, IP: "dhcp"},
		Volumes:  []initVolume{{Name: "data", Storage: ch.storage.name, Size: "1G", Mount: "/srv/data"}},
	}
	comments := []manifest.Comment{
		{Head: initHeader(endpoint, f)},
		{Path: "apps.0", Head: "An app is one container; its name is also the container's hostname."},
		{Path: "apps.0.template", Line: "one of the templates above"},
		{Path: "apps.0.memory", Line: "MiB"},
		{Path: "apps.0.features.nesting", Line: "systemd inside the container wants it"},
		{Path: "apps.0.volumes", Head: "A volume outlives the container: corral keeps it when it replaces or\ndestroys the container, and mounts it into the next one."},
	}
	if len(ch.template.nodes) < len(f.online) {
		app.Node = ch.template.nodes[0]
		comments = append(comments, manifest.Comment{Path: "apps.0.node", Line: "the template is only there"})
	} else if len(f.online) > 1 {
		comments = append(comments, manifest.Comment{Path: "apps.0.cores", Head: "node: left out, so corral places the app (placement: spread)"})
	}
	b, err := manifest.EncodeCommented(initDoc{Apps: []initApp{app}}, comments)
	return string(b), err
}

// initHeader is the comment atop init's manifest: where it came from,
// what to run next, and what the cluster offers.
func initHeader(endpoint string, f *clusterFacts) string {
	lines := []string{
		"corral.yaml, written by corral init from the cluster it found (" + endpoint + ").",
		"docs/manifest.md describes every key. Next:",
		"",
		"  corral validate   # check this file; no cluster needed",
		"  corral plan       # what apply would change",
		"  corral apply      # make it so",
		"",
	}
	online := "Nodes online: " + strings.Join(f.online, ", ")
	if len(f.offline) > 0 {
		online += " (offline: " + strings.Join(f.offline, ", ") + ")"
	}
	lines = append(lines, online, "Storages for root file systems and volumes:")
	for _, s := range f.storages {
		lines = append(lines, "  "+s.name+" ("+s.kind+": "+s.content+") on "+strings.Join(s.nodes, ", "))
	}
	lines = append(lines, "Bridges:")
	for _, br := range f.bridges {
		lines = append(lines, "  "+br.name+" on "+strings.Join(br.nodes, ", "))
	}
	lines = append(lines, "CT templates:")
	for _, t := range f.templates {
		lines = append(lines, "  "+t.name+" on "+strings.Join(t.nodes, ", "))
	}
	return strings.Join(lines, "\n")
}

func newInitCmd(st *streams) *cobra.Command {
	var cf connFlags
	var path, output string
	cmd := &cobra.Command{
		Use:         "init",
		Annotations: jsonForm(),
		Short:       "Write a commented corral.yaml for this cluster: its nodes, storages, bridges and CT templates",
		Long: `init reads the cluster (its online nodes and, on each, the storages that
hold root file systems and volumes, the network bridges and the CT
templates) and writes a manifest (-f, default corral.yaml) that lists them
in comments and declares one app on the template, storage and bridge most
nodes have (Debian, local-lvm and vmbr0 first). The file validates as
written. init never overwrites a file: it refuses when -f exists.
-o json prints what it wrote and chose: {file, app, template, storage,
bridge, nodes}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %s: want text or json", output)
			}
			r, err := runInit(cmd.Context(), st, cf, path)
			if err != nil || output != "json" {
				return err
			}
			return writeJSON(st, r)
		},
	}
	cmd.Flags().StringVarP(&path, "file", "f", "corral.yaml", "manifest to write; never overwritten")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cf.add(cmd.Flags())
	return cmd
}

// initResult is corral init's answer: the file it wrote, its app and
// what it chose for it, and the cluster's online nodes.
type initResult struct {
	File     string   `json:"file"`
	App      string   `json:"app"`
	Template string   `json:"template"`
	Storage  string   `json:"storage"`
	Bridge   string   `json:"bridge"`
	Nodes    []string `json:"nodes"`
}

// runInit discovers the cluster and writes the manifest at path, which
// must not exist.
func runInit(ctx context.Context, st *streams, cf connFlags, path string) (*initResult, error) {
	exists := fmt.Errorf("%s exists: corral init never overwrites a manifest; pass -f with a new file name, or move it away first", path)
	if _, err := os.Lstat(path); err == nil {
		return nil, exists
	}
	ctx, cancel := readOnly(ctx)
	defer cancel()
	s, err := connect(ctx, st, cf)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	facts, err := discover(ctx, s.client)
	if err != nil {
		return nil, fmt.Errorf("init: read the cluster: %w", err)
	}
	ch, err := choose(facts)
	if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	doc, err := initManifest(s.endpoint, facts, ch)
	var text []byte
	if err == nil {
		text, err = manifest.FormatChecked(path, []byte(doc))
	}
	if err != nil {
		return nil, fmt.Errorf("init: the manifest it made does not validate (please report this): %w", err)
	}
	if err := manifest.WriteNew(path, text); errors.Is(err, os.ErrExist) {
		return nil, exists
	} else if err != nil {
		return nil, fmt.Errorf("init: %w", err)
	}
	ui.WriteInitWrote(st.err, path, filepath.Base(path), "app", ch.template.name)
	return &initResult{File: path, App: "app", Template: ch.template.name, Storage: ch.storage.name, Bridge: ch.bridge.name, Nodes: facts.online}, nil
}
