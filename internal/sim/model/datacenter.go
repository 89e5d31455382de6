package model

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// OperatorPrivileges is the operator role: the privileges that drive the
// whole LXC lifecycle through an API token, with Datastore.AllocateTemplate
// for the template downloads corral makes when a manifest names a
// template the node lacks (corral doctor --print-setup grants it too),
// and Pool.Allocate and Pool.Audit for a manifest's pool: (issue 33).
var OperatorPrivileges = []string{
	"VM.Allocate", "VM.Audit", "VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory",
	"VM.Config.Network", "VM.Config.Options", "VM.PowerMgmt", "VM.Migrate", "VM.Snapshot",
	"VM.Snapshot.Rollback", "VM.Backup", "Datastore.Allocate", "Datastore.AllocateSpace",
	"Datastore.AllocateTemplate", "Datastore.Audit", "Sys.Audit", "SDN.Use", "Pool.Allocate", "Pool.Audit",
}

// Names of the bootstrap identities the emulator creates.
const (
	OperatorRole   = "CorralOperator"
	OperatorUser   = "corral@pve"
	OperatorToken  = "corral"
	RootTokenName  = "sim"
	DefaultBridge  = "vmbr0"
	DefaultSDNZone = "localnetwork"
)

// DefaultTemplate is the Debian 12 template every node holds from the start.
const DefaultTemplate = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// NodeNames is the node list for n nodes: "pve", or pve1..pveN.
func NodeNames(n int) []string {
	if n <= 1 {
		return []string{"pve"}
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("pve%d", i+1)
	}
	return out
}

// newDatacenter builds the default datacenter: nodes, the local and
// local-lvm storages, the Debian 12 template on every node (its files
// dated as the catalogue's, as a downloaded template's are dated by its
// build, so that every emulator shares one archive), root@pam with
// a password and a token, and the corral operator (privsep token with the
// operator role granted on both the user and the token, seed 004 §3.3).
func (c *Cluster) newDatacenter() (*State, error) {
	now := c.now()
	st := &State{Version: c.opts.Version, Created: now.Unix(), NextPID: 0}
	st.fixup()
	for i, name := range NodeNames(c.opts.Nodes) {
		st.Nodes = append(st.Nodes, &Node{Name: name, ID: i + 1, CPUs: 8, MemBytes: 32 * gib, Online: true, Booted: now.Unix()})
	}
	st.Storages = []*Storage{
		{ID: "local", Type: "dir", Content: []string{"backup", "iso", "vztmpl"}, Path: "/var/lib/vz", Total: 100 * gib},
		{ID: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}, VGName: "pve", Pool: "data", Total: 400 * gib},
	}
	a, _ := applianceFor("debian-12-standard_12.12-1_amd64.tar.zst")
	for _, n := range st.Nodes {
		name := "vztmpl/" + a.Template
		size, err := c.appliances.writeAppliance(c.storage.volumePath(n.Name, "local", name), a, applianceMTime)
		if err != nil {
			return nil, fmt.Errorf("model: write template: %w", err)
		}
		v := &Volume{Node: n.Name, Storage: "local", Name: name, Size: size, Format: "tzst", Content: "vztmpl", Ctime: now.Unix()}
		st.Volumes[st.volKey(n.Name, v.VolID())] = v
	}

	acc := NewAccess(c.opts.Version)
	st.Access = acc
	st.Creds.RootPassword = randomHex(12)
	if err := acc.SetPassword("root@pam", st.Creds.RootPassword); err != nil {
		return nil, err
	}
	rootSecret, err := acc.AddToken("root@pam", RootTokenName, false)
	if err != nil {
		return nil, err
	}
	st.Creds.RootToken = "root@pam!" + RootTokenName + "=" + rootSecret
	if err := acc.AddRole(OperatorRole, OperatorPrivileges); err != nil {
		return nil, err
	}
	if err := acc.AddUser(OperatorUser, ""); err != nil {
		return nil, err
	}
	opSecret, err := acc.AddToken(OperatorUser, OperatorToken, true)
	if err != nil {
		return nil, err
	}
	st.Creds.OperatorToken = OperatorUser + "!" + OperatorToken + "=" + opSecret
	if err := acc.SetACL("/", []string{OperatorRole}, []string{OperatorUser}, nil, []string{OperatorUser + "!" + OperatorToken}, true, false); err != nil {
		return nil, err
	}
	return st, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// Credentials returns the bootstrap credentials for Dir/env.
func (c *Cluster) Credentials() BootstrapCredential {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.Creds
}
