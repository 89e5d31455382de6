package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/ui/human"
)

// Options tune Check.
type Options struct {
	// Endpoint is shown in the report ("https://pve:8006", "embedded
	// emulator").
	Endpoint string
	// Role names the role in fixes when the token's own is not known
	// (default DefaultRole).
	Role string
	// explainOnlyMissing (Preflight) reads the token's user's privileges
	// and the ACL only when the token lacks a privilege the manifest
	// needs: they explain a missing privilege and change no verdict, and
	// they were half of apply's permission reads (issue 30).
	explainOnlyMissing bool
}

// Report is the outcome of Check: pure data, rendered by WriteText and
// WriteJSON.
type Report struct {
	Endpoint string `json:"endpoint,omitempty"`
	TokenID  string `json:"token_id"`
	// Applyable is true when no finding is an error or needs root.
	Applyable    bool          `json:"applyable"`
	Facts        Facts         `json:"facts"`
	Findings     []Finding     `json:"findings"`
	Requirements []Requirement `json:"requirements"`
}

// Facts are what Check learnt about the cluster.
type Facts struct {
	Version  string      `json:"version,omitempty"`
	Release  string      `json:"release,omitempty"`
	Nodes    []NodeFacts `json:"nodes,omitempty"`
	NextVMID int         `json:"next_vmid,omitempty"`
	Apps     []AppFacts  `json:"apps,omitempty"`
}

// NodeFacts are one node's facts.
type NodeFacts struct {
	Name     string         `json:"name"`
	Status   string         `json:"status,omitempty"`
	Storages []StorageFacts `json:"storages,omitempty"`
	// Templates are the manifest's templates present on the node;
	// MissingTemplates those absent.
	Templates        []string `json:"templates,omitempty"`
	MissingTemplates []string `json:"missing_templates,omitempty"`
	Keeper           int      `json:"keeper_vmid,omitempty"`
}

// StorageFacts is a storage as the token sees it on a node.
type StorageFacts struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	Content []string `json:"content"`
	Active  bool     `json:"active"`
	Total   int64    `json:"total,omitempty"`
	Avail   int64    `json:"avail,omitempty"`
	// Need is what this manifest would allocate on it now, in bytes.
	Need int64 `json:"need,omitempty"`
}

// AppFacts say where each app is or goes.
type AppFacts struct {
	Name   string `json:"name"`
	Node   string `json:"node"`
	VMID   int    `json:"vmid,omitempty"`
	Exists bool   `json:"exists"`
}

func (r *Report) add(f Finding) { r.Findings = append(r.Findings, f) }

func (r *Report) finish() *Report {
	r.Applyable = true
	for _, f := range r.Findings {
		if f.Severity == SevError || f.Severity == SevRoot {
			r.Applyable = false
		}
	}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if r.Requirements == nil {
		r.Requirements = []Requirement{}
	}
	return r
}

// Check runs every check for manifest f with client c: reachability and
// TLS trust, PVE version, the token's effective privileges on every path
// the manifest touches (and, when it may read them, its user's and its
// ACL, to explain the privsep intersection), storages, templates, free
// VMIDs, free space, and what only root@pam can set. Problems are
// findings in the report; the error is only ctx's.
func Check(ctx context.Context, c *pve.Client, f *manifest.File, opts Options) (*Report, error) {
	k := &checker{c: c, f: f, opts: opts, r: &Report{Endpoint: opts.Endpoint, TokenID: c.TokenID()}}
	if ok, err := k.version(ctx); !ok {
		return k.unreachable(ctx, err)
	}
	if ok, err := k.nodes(ctx); !ok {
		return k.unreachable(ctx, err)
	}
	if err := k.locate(ctx); err != nil {
		return nil, err
	}
	k.place()
	if id, err := c.PeekNextID(ctx); err == nil {
		k.r.Facts.NextVMID = id
	}
	if err := k.nodeFacts(ctx); err != nil {
		return nil, err
	}
	if err := k.privileges(ctx); err != nil {
		return nil, err
	}
	k.notes(ctx)
	sortFindings(k.r.Findings)
	return k.r.finish(), nil
}

// checker is one run of Check: its inputs, what each step learns for the
// next, and the report it fills. Its steps run in the order Check calls
// them, each reading what the ones before it found.
type checker struct {
	c    *pve.Client
	f    *manifest.File // after place: only the apps on online nodes
	opts Options
	r    *Report
	t    Targets

	nodeList []pve.Node
	names    []string // sorted node names
	offline  map[string]bool
	res      []pve.ClusterResource
	// existing are corral's containers by app, others the guests corral
	// does not manage by VMID.
	existing  map[string]pve.ClusterResource
	others    map[int]pve.ClusterResource
	usedNodes map[string]bool
	storages  map[string]map[string]pve.Storage
}

// unreachable ends Check after a first request failed: with ctx's error
// when it was cancelled, else with a report whose one finding says why
// the cluster could not be asked (no further check means anything then).
func (k *checker) unreachable(ctx context.Context, err error) (*Report, error) {
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	k.r.add(connectFinding(err, k.c.TokenID()))
	return k.r.finish(), nil
}

// version asks the PVE version, which decides which privileges exist
// (Targets.Version) and whether corral runs at all (8.x or 9.x).
func (k *checker) version(ctx context.Context) (bool, error) {
	v, err := k.c.Version(ctx)
	if err != nil {
		return false, err
	}
	k.r.Facts.Version, k.r.Facts.Release = v.Version, v.Release
	k.t = Targets{Version: v.Release, Apps: map[string]Placement{}, Keepers: map[string]int{}, MissingTemplates: map[string]bool{}}
	if k.t.Version == "" {
		k.t.Version = v.Version
	}
	if k.t.major() < 8 {
		k.r.add(Finding{Severity: SevError, Kind: "version", Message: fmt.Sprintf("Proxmox VE %s is too old: corral needs 8.x or 9.x", v.Version)})
	}
	return true, nil
}

// nodes lists the cluster's nodes and which are offline: apply leaves
// the apps on an offline node alone, so doctor does too.
func (k *checker) nodes(ctx context.Context) (bool, error) {
	nodes, err := k.c.Nodes(ctx)
	if err != nil {
		return false, err
	}
	k.nodeList = nodes
	k.offline = map[string]bool{}
	for _, n := range nodes {
		k.names = append(k.names, n.Node)
		if n.Status != "" && n.Status != "online" {
			k.offline[n.Node] = true
		}
	}
	sort.Strings(k.names)
	if len(k.names) > 0 {
		k.t.DefaultNode = k.names[0]
	}
	return true, nil
}

// locate finds where each app is: corral finds its containers by their
// tags, as apply does, and notes each node's keeper CT and the guests it
// does not manage (whose VMIDs an app may not take).
func (k *checker) locate(ctx context.Context) error {
	res, err := k.c.ClusterResources(ctx, "vm")
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	k.res = res
	k.existing = map[string]pve.ClusterResource{}
	k.others = map[int]pve.ClusterResource{}
	for _, g := range res {
		tags := plan.ParseTags(g.Tags)
		if g.Type != "lxc" && g.Type != "qemu" || !slices.Contains(tags, plan.TagManaged) {
			k.others[g.VMID] = g
			continue
		}
		if slices.Contains(tags, plan.TagKeeper) {
			if g.Type != "lxc" {
				continue // a keeper VM (of kind: vm apps' disks) is not the CT keeper doctor checks
			}
			if kv, ok := k.t.Keepers[g.Node]; !ok || g.VMID < kv {
				k.t.Keepers[g.Node] = g.VMID
			}
			continue
		}
		for _, tag := range tags {
			if name, ok := strings.CutPrefix(tag, plan.TagAppPrefix); ok {
				if e, seen := k.existing[name]; !seen || g.VMID < e.VMID {
					k.existing[name] = g
				}
			}
		}
	}
	for _, n := range k.names {
		if !k.offline[n] {
			k.t.DefaultNode = n // new apps go to an online node, as apply does
			break
		}
	}
	return nil
}

// place gives each app its node and VMID (where it is, else where apply
// would put it) and keeps only the apps on online nodes: apply leaves the
// others alone, so they are not checked.
func (k *checker) place() {
	k.usedNodes = map[string]bool{}
	online := *k.f
	online.Apps = nil
	for _, a := range k.f.Apps {
		p := Placement{Node: a.Node, VMID: a.VMID}
		g, exists := k.existing[a.Name]
		if exists {
			p = Placement{Node: g.Node, VMID: g.VMID}
		}
		if p.Node == "" {
			p.Node = k.t.DefaultNode
		}
		if k.offline[p.Node] {
			k.r.add(Finding{Severity: SevWarning, Kind: "node", App: a.Name, Message: fmt.Sprintf("app %s: node %s is offline; apply leaves the app alone until it is back, and it is not checked here", a.Name, p.Node)})
			continue
		}
		online.Apps = append(online.Apps, a)
		if !slices.Contains(k.names, p.Node) {
			k.r.add(Finding{Severity: SevError, Kind: "node", App: a.Name, Message: fmt.Sprintf("app %s: node %q does not exist (nodes: %s)", a.Name, p.Node, strings.Join(k.names, ", "))})
		}
		if o, taken := k.others[a.VMID]; a.VMID > 0 && !exists && taken {
			k.r.add(Finding{Severity: SevError, Kind: "vmid", App: a.Name, Message: fmt.Sprintf("app %s: vmid %d is taken by %s %d (%s) on %s, which corral does not manage; pick another vmid or leave it out", a.Name, a.VMID, o.Type, o.VMID, o.Name, o.Node)})
		}
		k.t.Apps[a.Name] = p
		k.usedNodes[p.Node] = true
		k.r.Facts.Apps = append(k.r.Facts.Apps, AppFacts{Name: a.Name, Node: p.Node, VMID: p.VMID, Exists: exists})
	}
	k.f = &online
}

// nodeFacts reads the storages, bridges and templates of each node an
// app uses (the others do not matter to this manifest).
func (k *checker) nodeFacts(ctx context.Context) error {
	k.storages = map[string]map[string]pve.Storage{}
	for _, n := range k.nodeList {
		nf := NodeFacts{Name: n.Node, Status: n.Status, Keeper: k.t.Keepers[n.Node]}
		if k.usedNodes[n.Node] {
			if err := k.nodeStorages(ctx, n.Node); err != nil {
				return err
			}
			if err := checkBridges(ctx, k.c, k.r, k.f, k.t, n.Node); err != nil {
				return err
			}
			k.templates(ctx, &nf)
		}
		k.r.Facts.Nodes = append(k.r.Facts.Nodes, nf)
	}
	sort.Slice(k.r.Facts.Nodes, func(i, j int) bool { return k.r.Facts.Nodes[i].Name < k.r.Facts.Nodes[j].Name })
	return nil
}

// nodeStorages reads node's storages as the token sees them and checks
// that the templates' storages hold templates; a storage list the token
// may not read leaves that to the privilege findings.
func (k *checker) nodeStorages(ctx context.Context, node string) error {
	list, err := k.c.StorageList(ctx, node, "")
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	k.storages[node] = map[string]pve.Storage{}
	for _, s := range list {
		k.storages[node][s.Storage] = s
	}
	if err == nil {
		checkTemplateStorages(k.r, k.f, k.t, node, k.storages[node])
	}
	return nil
}

// templates notes which of the manifest's templates nf's node holds and
// which it lacks (apply downloads those first).
func (k *checker) templates(ctx context.Context, nf *NodeFacts) {
	for _, a := range k.f.Apps {
		if k.t.Apps[a.Name].Node != nf.Name || a.Template == "" || slices.Contains(nf.Templates, a.Template) || slices.Contains(nf.MissingTemplates, a.Template) {
			continue
		}
		vols, err := k.c.StorageContent(ctx, nf.Name, storageOf(a.Template), "vztmpl", 0)
		if err != nil {
			continue // not visible: the privilege findings say why
		}
		if slices.ContainsFunc(vols, func(v pve.Volume) bool { return v.VolID == a.Template }) {
			nf.Templates = append(nf.Templates, a.Template)
		} else {
			nf.MissingTemplates = append(nf.MissingTemplates, a.Template)
			k.t.MissingTemplates[nf.Name+"/"+a.Template] = true
		}
	}
}

// privileges compares what the manifest needs with what the token holds
// (and, where it may read them, its user's privileges and its ACL), then
// checks the storages with what the token may see of them.
func (k *checker) privileges(ctx context.Context) error {
	reqs := Requirements(k.f, k.t)
	k.r.Requirements = reqs
	visible := map[string]bool{}
	for _, g := range k.res {
		visible["/vms/"+strconv.Itoa(g.VMID)] = true
	}
	acc, unread, err := gatherAccess(ctx, k.c, reqs, k.opts, visible)
	if err != nil {
		return err
	}
	k.r.Findings = append(k.r.Findings, unread...)
	k.r.Findings = append(k.r.Findings, Evaluate(reqs, acc)...)
	checkStorages(ctx, k.c, k.r, k.f, k.t, k.storages, acc)
	return nil
}

// notes adds what is not a privilege: missing templates, PVE 8's
// differences, and what only root@pam can set.
func (k *checker) notes(ctx context.Context) {
	for node, m := range k.t.MissingTemplates {
		if !m {
			continue
		}
		n, tmpl, _ := strings.Cut(node, "/")
		k.r.add(Finding{Severity: SevInfo, Kind: "template", Message: fmt.Sprintf("template %s is not on node %s: apply downloads it first (Datastore.AllocateTemplate on /storage/%s), or upload it once by hand", tmpl, n, storageOf(tmpl))})
	}
	if k.t.major() == 8 {
		k.r.add(Finding{Severity: SevInfo, Kind: "version", Message: "Proxmox VE 8: a container created without 'unprivileged' is privileged (PVE 9 defaults to unprivileged); corral always sends it explicitly, and the keepattrs mount option does not exist"})
	}
	for _, a := range k.f.Apps {
		rootNeeds(ctx, k.c, k.r, a, k.t.Apps[a.Name], k.existing)
	}
}

// connectFinding explains why the first request failed.
func connectFinding(err error, tokenID string) Finding {
	var ce *pve.CertError
	switch {
	case errors.As(err, &ce):
		msg := fmt.Sprintf("the server's TLS certificate is not trusted; its SHA-256 fingerprint is %s. Check it on the host (pvenode cert info) and pin it", ce.Fingerprint)
		if ce.Pinned != "" {
			msg = fmt.Sprintf("the server's TLS certificate has fingerprint %s, not the pinned %s. If the host's certificate was replaced on purpose, pin the new one", ce.Fingerprint, ce.Pinned)
		}
		return Finding{Severity: SevError, Kind: "tls", Message: msg,
			Fix: []string{"export PROXMOX_VE_FINGERPRINT=" + ce.Fingerprint, "corral doctor --fingerprint " + ce.Fingerprint}}
	case errors.Is(err, pve.ErrUnauthorized):
		return Finding{Severity: SevError, Kind: "auth", Message: fmt.Sprintf("PVE does not accept the API token %s: check its id and secret (PROXMOX_VE_API_TOKEN or --api-token), and that the token and its user exist, are enabled and have not expired", tokenID)}
	}
	return Finding{Severity: SevError, Kind: "connection", Message: fmt.Sprintf("cannot reach the PVE API: %v", err)}
}

// gatherAccess reads the token's effective privileges on every path, and
// its user's and its ACL entries when the token may. A path whose
// privileges could not be read counts as holding none, and gets a
// warning finding saying so (unread). The number of requests does not
// grow with the containers that exist (see readPerms; visible holds the
// /vms/<vmid> paths of the containers /cluster/resources showed).
//
// With opts.explainOnlyMissing it stops after the token's privileges when
// the token holds every one reqs needs and each could be read: the rest
// only explains a missing privilege (Evaluate's findings are the same).
func gatherAccess(ctx context.Context, c *pve.Client, reqs []Requirement, opts Options, visible map[string]bool) (acc Access, unread []Finding, err error) {
	acc = Access{TokenID: c.TokenID(), Token: Perms{}, Role: opts.Role}
	user, _, _ := strings.Cut(acc.TokenID, "!")
	paths := []string{"/", "/access", "/vms"}
	for _, r := range reqs {
		if !slices.Contains(paths, r.Path) {
			paths = append(paths, r.Path)
		}
	}
	perms, failed, err := readPerms(ctx, c, paths, "", visible)
	if err != nil {
		return acc, nil, err
	}
	for _, p := range paths {
		if ferr, ok := failed[p]; ok {
			acc.Token[p] = map[string]int{}
			unread = append(unread, Finding{Severity: SevWarning, Kind: "connection", Path: p,
				Message: fmt.Sprintf("could not read the token's privileges on %s (%v): the findings below take it to hold none there; run doctor again", p, ferr)})
			continue
		}
		acc.Token[p] = perms[p]
	}
	if opts.explainOnlyMissing && len(unread) == 0 && !slices.ContainsFunc(reqs, func(r Requirement) bool { return !acc.holds(r) }) {
		return acc, nil, nil
	}
	if user != "" && user != acc.TokenID {
		perms, failed, err := readPerms(ctx, c, paths, user, visible)
		switch {
		case err != nil:
			return acc, nil, err
		case len(failed) > 0:
			acc.User = nil // may not read it (Sys.Audit on /access)
		default:
			acc.User = perms
		}
	}
	if acc.Token.has("/access", "Sys.Audit", false) {
		acl, aerr := c.ACL(ctx)
		roles, rerr := c.Roles(ctx)
		if aerr == nil && rerr == nil {
			privs := map[string][]string{}
			special := map[string]bool{}
			for _, ro := range roles {
				privs[ro.RoleID] = ro.PrivList()
				special[ro.RoleID] = bool(ro.Special)
			}
			acc.GrantsKnown = true
			for _, e := range acl {
				if e.Type == "token" && e.UGID == acc.TokenID {
					acc.TokenGrants = append(acc.TokenGrants, Grant{Path: e.Path, Role: e.RoleID, Propagate: bool(e.Propagate), Privs: privs[e.RoleID], Special: special[e.RoleID]})
				}
			}
		}
	}
	return acc, unread, nil
}

// guestPath reports a container's own ACL path, /vms/<vmid>.
func guestPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/vms/")
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// readPerms reads the privileges of the token (userid "") or of userid
// on paths, with a number of requests that does not grow with the
// containers that exist. It starts with one read of every path (GET
// /access/permissions without path lists each ACL node, each top-level
// path and each pool member where the principal holds something, with
// the same privileges a read of that path alone returns), and reads
// alone only the paths that list leaves out, since an unlisted path may
// hold nothing or may inherit from an ancestor. The /vms/<vmid> of a
// visible container missing from the list has no ACL entry of its own
// (one with entries is listed, since the caller sees the container only
// with some privilege on it), so it holds what every such container
// holds: read once, on the first. failed holds the paths that could not
// be read; err is ctx's.
func readPerms(ctx context.Context, c *pve.Client, paths []string, userid string, visible map[string]bool) (perms Perms, failed map[string]error, err error) {
	perms, failed = Perms{}, map[string]error{}
	one := func(p string) {
		got, err := c.Permissions(ctx, p, userid)
		if err != nil {
			failed[p] = err
			return
		}
		perms[p] = flags(got[p])
	}
	all, lerr := c.Permissions(ctx, "", userid)
	inherit := "" // the first visible container not listed, read for all of them
	for _, p := range paths {
		switch {
		case lerr == nil && all[p] != nil:
			perms[p] = flags(all[p])
		case !guestPath(p) || !visible[p]:
			one(p)
		case lerr != nil:
			failed[p] = lerr
		case inherit == "":
			inherit = p
			if one(p); failed[p] != nil {
				lerr = failed[p]
			}
		default:
			perms[p] = maps.Clone(perms[inherit])
		}
	}
	if ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return perms, failed, nil
}

func flags(m map[string]pve.Bool01) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = 0
		if v {
			out[k] = 1
		}
	}
	return out
}

// checkStorages checks that each storage the manifest names is on its
// node, holds the content it is used for, and has room for what the
// manifest would allocate now.
func checkStorages(ctx context.Context, c *pve.Client, r *Report, f *manifest.File, t Targets, storages map[string]map[string]pve.Storage, acc Access) {
	need := map[string]int64{} // node/sid → bytes
	var order []string
	use := func(app, node, sid, content, purpose string, size int64) {
		k := node + "/" + sid
		if _, ok := need[k]; !ok {
			order = append(order, k)
			need[k] = 0
		}
		need[k] += size
		s, ok := storages[node][sid]
		if !ok {
			if acc.Token.has("/storage/"+sid, "Datastore.Audit", false) || acc.Token.has("/storage/"+sid, "Datastore.AllocateSpace", false) {
				r.add(Finding{Severity: SevError, Kind: "storage", App: app, Message: fmt.Sprintf("app %s: storage %s (for %s) does not exist on node %s", app, sid, purpose, node)})
			}
			return
		}
		ok = false
		for _, ct := range strings.Split(content, "|") {
			ok = ok || s.HasContent(ct)
		}
		if !ok {
			r.add(Finding{Severity: SevError, Kind: "storage", App: app, Message: fmt.Sprintf("app %s: storage %s on node %s cannot hold %s: its content types are %s, and %s needs %s", app, sid, node, purpose, s.Content, purpose, strings.ReplaceAll(content, "|", " or "))})
		}
	}
	for _, a := range f.Apps {
		p := t.Apps[a.Name]
		created := p.VMID > 0 && slices.ContainsFunc(r.Facts.Apps, func(af AppFacts) bool { return af.Name == a.Name && af.Exists })
		size := int64(0)
		if !created {
			size = a.RootFS.Size.Bytes()
		}
		use(a.Name, p.Node, a.RootFS.Storage, "rootdir", "the root file system", size)
		for _, v := range a.Volumes {
			sz := int64(0)
			if !created && v.Adopt == "" {
				sz = v.Size.Bytes()
			}
			use(a.Name, p.Node, v.Storage, "rootdir|images", "volume "+v.Name, sz)
		}
		if a.Backup.Storage != "" {
			use(a.Name, p.Node, a.Backup.Storage, "backup", "backups", 0)
		}
	}
	for _, k := range order {
		node, sid, _ := strings.Cut(k, "/")
		s, ok := storages[node][sid]
		if !ok {
			continue
		}
		avail, total := storageSpace(ctx, c, node, s)
		for i := range r.Facts.Nodes {
			if r.Facts.Nodes[i].Name == node {
				r.Facts.Nodes[i].Storages = append(r.Facts.Nodes[i].Storages, StorageFacts{
					ID: sid, Type: s.Type, Content: strings.Split(s.Content, ","), Active: bool(s.Active),
					Total: total, Avail: avail, Need: need[k],
				})
			}
		}
		if need[k] > 0 && avail > 0 && need[k] > avail {
			sev, extra := SevError, ""
			if s.Type == "lvmthin" || s.Type == "zfspool" {
				sev, extra = SevWarning, " (thin provisioning lets the allocation pass, but writes fail once the pool is full)"
			}
			r.add(Finding{Severity: sev, Kind: "space", Message: fmt.Sprintf("storage %s on node %s has %s free, and this manifest would allocate %s%s", sid, node, human.Size(avail), human.Size(need[k]), extra)})
		}
	}
}

// storageSpace is storage s's free and total bytes on node. The node's
// storage list (s) carries the same figures as the storage's own status
// read (PVE computes both with storage_info), so the status is read only
// when the list has none, as for a storage not active (issue 30: one
// read per storage in every preflight).
func storageSpace(ctx context.Context, c *pve.Client, node string, s pve.Storage) (avail, total int64) {
	if s.Total > 0 {
		return s.Avail, s.Total
	}
	if st, err := c.StorageStatus(ctx, node, s.Storage); err == nil {
		return st.Avail, st.Total
	}
	return s.Avail, s.Total
}

// rootNeeds reports what of app a only root@pam can set, with the exact
// host command, unless the container already has it.
func rootNeeds(ctx context.Context, c *pve.Client, r *Report, a manifest.App, p Placement, existing map[string]pve.ClusterResource) {
	h := NeedsOf(a)
	if h.Empty() {
		return
	}
	g, exists := existing[a.Name]
	if exists {
		if conf, err := c.ContainerConfig(ctx, g.Node, g.VMID, false); err == nil {
			if cur, err := conf.Features(); err == nil {
				h = h.Missing(cur)
			}
		}
		if h.Empty() {
			return
		}
	}
	cmds := RootCommands(p.VMID, a.Features.Nesting, len(a.Volumes), h)
	msg := fmt.Sprintf("app %s needs %s, which only a root@pam session can set: no API token qualifies, not even root's own (pve-container checks for root@pam itself). ", a.Name, rootWhat(h))
	switch {
	case h.Privileged:
		msg += "Make the app unprivileged (unprivileged: true), or have root run on node " + p.Node + ":"
	case exists:
		msg += fmt.Sprintf("Run once on node %s as root, then apply again:", p.Node)
	case p.VMID > 0:
		msg += fmt.Sprintf("apply creates CT %d and stops before provisioning; then run once on node %s as root, and apply again:", p.VMID, p.Node)
	default:
		msg += fmt.Sprintf("apply creates the container and stops before provisioning, printing its VMID; then run once on node %s as root, and apply again:", p.Node)
	}
	for i := range cmds {
		cmds[i] = strings.TrimSpace(cmds[i])
	}
	r.add(Finding{Severity: SevRoot, Kind: "root-only", App: a.Name, Path: vmPathString(p.VMID), Operation: "set " + rootWhat(h), Message: msg, Fix: cmds})
}

func vmPathString(vmid int) string {
	if vmid > 0 {
		return "/vms/" + strconv.Itoa(vmid)
	}
	return ""
}

var sevOrder = map[Severity]int{SevError: 0, SevRoot: 1, SevWarning: 2, SevInfo: 3}

func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool { return sevOrder[fs[i].Severity] < sevOrder[fs[j].Severity] })
}

// BlockedError is Preflight's answer when apply would fail: the findings
// that block it.
type BlockedError struct {
	Findings []Finding
}

func (e *BlockedError) Error() string {
	var b strings.Builder
	b.WriteString("preflight: apply would fail with this token; nothing was changed:")
	for _, f := range e.Findings {
		b.WriteString("\n  - ")
		if f.Path != "" && f.Privilege != "" {
			fmt.Fprintf(&b, "%s on %s (needed to %s): ", f.Privilege, f.Path, f.Operation)
		}
		b.WriteString(f.Message)
		for _, fix := range f.Fix {
			b.WriteString("\n      fix: " + fix)
		}
	}
	b.WriteString("\nrun `corral doctor` for the whole report, or `corral doctor --print-setup` for a token that can do the job")
	return b.String()
}

// Preflight runs Check and returns a *BlockedError listing every error
// finding, or nil. Root-only needs do not block: apply creates what it
// can and stops before the step that needs root, saying what to run.
func Preflight(ctx context.Context, c *pve.Client, f *manifest.File) error {
	r, err := Check(ctx, c, f, Options{explainOnlyMissing: true})
	if err != nil {
		return err
	}
	var blocking []Finding
	for _, fd := range r.Findings {
		if fd.Severity == SevError {
			blocking = append(blocking, fd)
		}
	}
	if len(blocking) > 0 {
		return &BlockedError{Findings: blocking}
	}
	return nil
}

// checkTemplateStorages finds templates on a storage the node does not
// have (or that holds no templates): PVE would answer the download with a
// permission error on /storage/<sid>, which blames the token.
func checkTemplateStorages(r *Report, f *manifest.File, t Targets, node string, storages map[string]pve.Storage) {
	var tmpl []string
	for id, s := range storages {
		if slices.Contains(strings.Split(s.Content, ","), "vztmpl") {
			tmpl = append(tmpl, id)
		}
	}
	sort.Strings(tmpl)
	have := strings.Join(tmpl, ", ")
	if have == "" {
		have = "none"
	}
	for _, a := range f.Apps {
		if t.Apps[a.Name].Node != node || a.Template == "" {
			continue
		}
		sid := storageOf(a.Template)
		s, ok := storages[sid]
		switch {
		case !ok:
			r.add(Finding{Severity: SevError, Kind: "template", App: a.Name, Message: fmt.Sprintf("app %s: template %s: storage %s does not exist on node %s (or is disabled there, or the token holds no privilege on /storage/%s); storages holding templates (vztmpl) there: %s", a.Name, a.Template, sid, node, sid, have)})
		case !slices.Contains(strings.Split(s.Content, ","), "vztmpl"):
			r.add(Finding{Severity: SevError, Kind: "template", App: a.Name, Message: fmt.Sprintf("app %s: template %s: storage %s on node %s does not hold templates (its content is %s); storages holding templates (vztmpl) there: %s", a.Name, a.Template, sid, node, s.Content, have)})
		}
	}
}

// checkBridges finds apps on a bridge the node does not have: PVE creates
// the container and fails its start ("bridge 'X' does not exist"). A list
// that cannot be read, or shows no bridge (PVE lists only those the token
// holds SDN.Audit or SDN.Use on), is a warning and checks nothing.
func checkBridges(ctx context.Context, c *pve.Client, r *Report, f *manifest.File, t Targets, node string) error {
	var apps []manifest.App
	for _, a := range f.Apps {
		if t.Apps[a.Name].Node == node && a.Network.Bridge != "" {
			apps = append(apps, a)
		}
	}
	if len(apps) == 0 {
		return nil
	}
	bridges, err := c.Bridges(ctx, node)
	switch {
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		r.add(Finding{Severity: SevWarning, Kind: "network", Message: fmt.Sprintf("could not read the network list of node %s (%v): the bridges of apps there are not checked", node, err)})
		return nil
	case len(bridges) == 0:
		r.add(Finding{Severity: SevWarning, Kind: "network", Message: fmt.Sprintf("the token sees no bridge on node %s (PVE lists a bridge only with SDN.Audit or SDN.Use on /sdn/zones/localnetwork/<bridge>): the bridges of apps there are not checked", node)})
		return nil
	}
	for _, a := range apps {
		if !slices.Contains(bridges, a.Network.Bridge) {
			r.add(Finding{Severity: SevError, Kind: "network", App: a.Name, Message: fmt.Sprintf("app %s: bridge %s does not exist on node %s (or the token lacks SDN.Use on /sdn/zones/localnetwork/%s); bridges there: %s; set network.bridge to one of them", a.Name, a.Network.Bridge, node, a.Network.Bridge, strings.Join(bridges, ", "))})
		}
	}
	return nil
}
