package model

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// haManager is the emulator's HA stack, in parts along pve-ha-manager's
// own lines: the API's resources (haResources, ha_resources.go), rules
// (haRules, ha_rules.go) and groups (haGroups, ha_groups.go), the status
// view (haStatusView, ha_status.go), the CRM loop (haCRM, ha_crm*.go),
// the LRM's tasks (haLRM, ha_lrm.go), and what being an HA resource
// changes for a CT or a VM (haGuest, ha_guest.go). Cluster holds it by name
// (c.ha) and embeds the API parts' exported methods (haAPI). The HA
// config and manager status stay in the State (State.HA), under the
// State's one lock. No part holds a *Cluster: each embeds haParts and
// holds one field per other part it calls; the LRM starts its tasks
// through ctPower's and ctMigrator's own API methods.
type haManager struct {
	resources haResources
	rules     haRules
	groups    haGroups
	status    haStatusView
	crm       haCRM
	lrm       haLRM
	guest     haGuest
}

// haParts are the fields every HA part holds, embedded: the State's lock
// and the State, the clock (the CRM's log and delays), the journal, and
// the CRM's wake-up, which a change to the HA config kicks.
type haParts struct {
	// stateMu guards the State; state is the State (nil until loaded).
	stateMu *stateMutex
	state   func() *State
	clock   func() time.Time
	journal interface {
		markCore()
		markGuest(vmid int)
		saveLocked() error
	}
	crm interface{ kickCRM() }
}

// changedLocked marks the HA config changed, wakes the CRM and saves.
func (hp haParts) changedLocked() error {
	hp.journal.markCore()
	hp.crm.kickCRM()
	return hp.journal.saveLocked()
}

// logLocked appends a CRM log line.
func (hp haParts) logLocked(level, format string, args ...any) {
	h := hp.state().haConfig()
	line := hp.clock().UTC().Format("2006-01-02 15:04:05") + " pve-ha-crm " + level + ": " + fmt.Sprintf(format, args...)
	h.Log = append(h.Log, line)
	if len(h.Log) > maxHALog {
		h.Log = h.Log[len(h.Log)-maxHALog:]
	}
}

// haAPI is the HA API's exported methods: Cluster embeds it (the
// interface, not the manager), so that these are the Cluster's methods
// and the parts' own workings are not; the other parts reach those
// through their own fields. Its value is haAPIParts over c.ha.
type haAPI interface {
	haResourceAPI
	haRuleAPI
	haGroupAPI
	haStatusAPI
}

// haAPIParts is haAPI made of the API parts (wireHA).
type haAPIParts struct {
	haResourceAPI
	haRuleAPI
	haGroupAPI
	haStatusAPI
}

// haResourceAPI is haResources' exported methods.
type haResourceAPI interface {
	HAResources(typ string) []HAResourceEntry
	HAResource(sid string) (HAResourceEntry, error)
	AddHAResource(params map[string]string) error
	UpdateHAResource(params map[string]string, del []string, digest string) error
	DeleteHAResource(sid string, purge bool) error
	RequestHAMotion(sid, node string, relocate bool) (HAMotion, error)
}

// haRuleAPI is haRules' exported methods.
type haRuleAPI interface {
	HARules(typ, resource string) []HARuleEntry
	HARule(id string) (HARuleEntry, error)
	SetHARule(create bool, params map[string]string, del []string, digest string) error
	DeleteHARule(id string) error
}

// haGroupAPI is haGroups' exported methods.
type haGroupAPI interface {
	HAGroups() ([]HAGroupEntry, error)
	HAGroup(id string) (HAGroupEntry, error)
	SetHAGroup(create bool, params map[string]string, del []string) error
	DeleteHAGroup(id string) error
}

// haStatusAPI is haStatusView's exported methods.
type haStatusAPI interface {
	HAStatus(node string) []HAStatusEntry
	HAManagerStatus() HAManagerStatus
	HALog() []string
	AnsweringNode() string
}

// haPower is what the HA stack needs of ctPower: the LRM's start and
// shutdown, and a fenced CT marked stopped.
type haPower interface {
	StartCT(auth Auth, node string, vmid int, params map[string]string) (string, error)
	ShutdownCT(auth Auth, node string, vmid int, params map[string]string) (string, error)
	markStoppedLocked(g *Guest)
}

// HA is what pve-ha-manager keeps in /etc/pve/ha: resources.cfg, the
// groups (PVE 8) or rules (PVE 9) that say where a resource may run, and
// the CRM's manager_status (the services' and nodes' HA states). The
// CRM loop (ha_crm.go) acts on it; the API (ha_resources.go,
// ha_rules.go, ha_status.go) reads and changes it. It is persisted with
// the rest of the cluster filesystem (State.HA, journal core).
type HA struct {
	// Resources is resources.cfg by sid ("ct:<vmid>", "vm:<vmid>").
	Resources map[string]*HAResource `json:"resources,omitempty"`
	// Groups is groups.cfg (PVE 8.4 only; 9.x migrated them to rules).
	Groups map[string]*HAGroup `json:"groups,omitempty"`
	// Rules is rules.cfg (PVE 9.x).
	Rules map[string]*HARule `json:"rules,omitempty"`
	// Services is manager_status' service_status by sid.
	Services map[string]*HAService `json:"services,omitempty"`
	// NodeState is manager_status' node_status: online, unknown, fence.
	NodeState map[string]string `json:"node_state,omitempty"`
	// Commands are queued CRM commands ("migrate ct:101 pve2").
	Commands []string `json:"commands,omitempty"`
	// Log is the CRM's log (pve-ha-crm's syslog lines), newest last,
	// bounded by maxHALog.
	Log []string `json:"log,omitempty"`
}

// maxHALog bounds HA.Log: it is for tests and users reading what the
// CRM did lately, not an archive.
const maxHALog = 200

// HAResource is one resources.cfg section. Unset fields keep PVE's
// defaults (state started, max_restart 1, max_relocate 1, failback 1),
// applied where PVE applies them (read_and_check_resources_config), so
// GET shows only what was set, as PVE does.
type HAResource struct {
	State       string `json:"state,omitempty"`
	Group       string `json:"group,omitempty"`
	Comment     string `json:"comment,omitempty"`
	MaxRestart  *int   `json:"max_restart,omitempty"`
	MaxRelocate *int   `json:"max_relocate,omitempty"`
	Failback    *bool  `json:"failback,omitempty"`
}

// requested is the resource's requested state with PVE's default and
// its backward-compatible alias (enabled = started).
func (r *HAResource) requested() string {
	switch r.State {
	case "", "enabled":
		return "started"
	}
	return r.State
}

// maxRestart and maxRelocate are the resource's limits with PVE's
// default of 1.
func (r *HAResource) maxRestart() int  { return intOr(r.MaxRestart, 1) }
func (r *HAResource) maxRelocate() int { return intOr(r.MaxRelocate, 1) }

func intOr(p *int, def int) int {
	if p == nil {
		return def
	}
	return *p
}

// HAGroup is one groups.cfg section (PVE 8): nodes is the node list with
// optional priorities ("pve1:2,pve2").
type HAGroup struct {
	Nodes      string `json:"nodes"`
	Restricted bool   `json:"restricted,omitempty"`
	NoFailback bool   `json:"nofailback,omitempty"`
	Comment    string `json:"comment,omitempty"`
}

// HARule is one rules.cfg section (PVE 9): a node-affinity rule (the
// resources' allowed nodes, strict or preferred) or a resource-affinity
// rule (resources kept together or apart).
type HARule struct {
	Type      string `json:"type"`
	Resources string `json:"resources"`
	Nodes     string `json:"nodes,omitempty"`
	Strict    bool   `json:"strict,omitempty"`
	Affinity  string `json:"affinity,omitempty"`
	Disable   bool   `json:"disable,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// HAService is one entry of manager_status' service_status: where the
// CRM has the service and in which state (started, request_stop,
// stopped, fence, recovery, migrate, relocate, error, freeze), plus
// what the LRM is doing for it.
type HAService struct {
	Node  string `json:"node"`
	State string `json:"state"`
	// Running is set once the LRM reported a successful start.
	Running bool `json:"running,omitempty"`
	// Target is the node of a migrate or relocate.
	Target string `json:"target,omitempty"`
	// FailedNodes are the nodes where a start failed (relocate policy).
	FailedNodes []string `json:"failed_nodes,omitempty"`
	// Restarts counts failed starts on the current node (max_restart).
	Restarts int `json:"restarts,omitempty"`
	// UPID is the LRM's task in flight for the service, "" when none.
	UPID string `json:"upid,omitempty"`
	// UPIDNode is the node the task runs on.
	UPIDNode string `json:"upid_node,omitempty"`
}

// haSID is the HA resource id of CT vmid.
func haSID(vmid int) string { return "ct:" + strconv.Itoa(vmid) }

// sidOf is the HA resource id of guest vmid by its kind: "vm:<vmid>"
// for a VM, else "ct:<vmid>" (a VMID names one guest of either kind).
func (st *State) sidOf(vmid int) string {
	if st.VMs[vmid] != nil {
		return "vm:" + strconv.Itoa(vmid)
	}
	return haSID(vmid)
}

// parseHASID is PVE::HA::Config::parse_sid: "ct:<vmid>", "vm:<vmid>",
// or a bare VMID that names a guest in the cluster, whose kind gives
// the type. It returns the sid and VMID.
func (st *State) parseHASID(sid string) (string, int, error) {
	typ, name, ok := strings.Cut(sid, ":")
	if !ok {
		name, typ = sid, ""
	}
	vmid, err := strconv.Atoi(name)
	if err != nil || vmid < 100 || (typ != "" && typ != "ct" && typ != "vm") {
		return "", 0, Failf("unable to parse service id '%s'\n", sid)
	}
	if typ == "" {
		if st.Guests[vmid] == nil && st.VMs[vmid] == nil {
			return "", 0, Failf("unable to find VM/CT with ID '%d'\n", vmid)
		}
		return st.sidOf(vmid), vmid, nil
	}
	return typ + ":" + name, vmid, nil
}

// haConfig is the cluster's HA config, created empty on first use.
// The State's lock must be held for writing.
func (st *State) haConfig() *HA {
	if st.HA == nil {
		st.HA = &HA{}
	}
	h := st.HA
	if h.Resources == nil {
		h.Resources = map[string]*HAResource{}
	}
	if h.Services == nil {
		h.Services = map[string]*HAService{}
	}
	if h.NodeState == nil {
		h.NodeState = map[string]string{}
	}
	return h
}

// haManagedIn is vm_is_ha_managed: guest vmid (a CT or a VM) has an HA
// resource whose requested state is not ignored.
func haManagedIn(st *State, vmid int) bool {
	if st.HA == nil {
		return false
	}
	r := st.HA.Resources[st.sidOf(vmid)]
	return r != nil && r.requested() != "ignored"
}

// haDigest is the digest of the HA config files, as PVE's section
// config digest changes with every write of resources.cfg/rules.cfg.
func haDigest(v any) string {
	b, _ := json.Marshal(v)
	s := sha1.Sum(b)
	return hex.EncodeToString(s[:])
}

// haSubject is the guest an HA service manages: a CT (*Guest, sid
// ct:<vmid>) or a VM (*VM, sid vm:<vmid>). The CRM decides for both
// alike from these; the LRM's tasks and a recovery's move are each
// kind's own (haLRM, haCRM.stealLocked).
type haSubject interface {
	haVMID() int
	haNode() string
	haRunning() bool
	Lock() string
}

func (g *Guest) haVMID() int     { return g.VMID }
func (g *Guest) haNode() string  { return g.Node }
func (g *Guest) haRunning() bool { return g.Running }
func (vm *VM) haVMID() int       { return vm.VMID }
func (vm *VM) haNode() string    { return vm.Node }
func (vm *VM) haRunning() bool   { return vm.Running }

// haGuest is the guest behind sid, of the sid's kind: nil when it does
// not exist (a ct: sid names no VM, nor a vm: sid a CT).
func (st *State) haGuest(sid string) haSubject {
	typ, name, _ := strings.Cut(sid, ":")
	vmid, err := strconv.Atoi(name)
	if err != nil {
		return nil
	}
	switch typ {
	case "ct":
		if g := st.Guests[vmid]; g != nil {
			return g
		}
	case "vm":
		if vm := st.VMs[vmid]; vm != nil {
			return vm
		}
	}
	return nil
}
