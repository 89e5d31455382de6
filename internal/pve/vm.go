package pve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Methods for /nodes/{node}/qemu: the VMs of kind: vm apps (issue 34).
// As for CTs, those returning a string return the UPID of the task PVE
// forked; a non-nil error means no task was started.

// VMConfig is GET /nodes/{node}/qemu/{vmid}/config. Values stay raw, as
// PVE printed them, because the keys are open-ended (scsiN, netN,
// ipconfigN, unusedN …); Digest is the config file's SHA-1, sent back to
// make an update fail when someone changed the config meanwhile.
type VMConfig struct {
	Digest string
	Values map[string]string
}

// UnmarshalJSON reads the config object, whatever JSON type each value has.
func (c *VMConfig) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("decode vm config: %w", err)
	}
	c.Values, c.Digest = make(map[string]string, len(raw)), ""
	for k, v := range raw {
		s, err := scalarText(v)
		if err != nil {
			return fmt.Errorf("decode vm config: %s: %w", k, err)
		}
		if k == "digest" {
			c.Digest = s
			continue
		}
		c.Values[k] = s
	}
	return nil
}

// VMCreate is the body of POST /nodes/{node}/qemu (CreateVM). Disks and
// Config are sent as given (PVE's spelling: "local-lvm:0,import-from=…",
// "virtio,bridge=vmbr0"); the typed fields are those whose encoding is
// easy to get wrong.
type VMCreate struct {
	VMID int
	// Disks sets drive keys (scsi0, ide2 …) to drive strings.
	Disks map[string]string
	// SSHKeys are authorized_keys lines for the cloud-init user; PVE
	// wants them URL-encoded (EncodeSSHKeys), which Encode does.
	SSHKeys []string
	// Config holds the other keys (name, cores, memory, balloon, agent,
	// net0, ciuser, ipconfig0, tags, description, onboot …).
	Config map[string]string
	// Start starts the VM once it is created (PVE's start=1).
	Start bool
	// Pool puts the VM into a resource pool.
	Pool string
}

// Encode is the form body.
func (c *VMCreate) Encode() url.Values {
	v := url.Values{"vmid": {strconv.Itoa(c.VMID)}}
	for k, s := range c.Config {
		v.Set(k, s)
	}
	for k, s := range c.Disks {
		v.Set(k, s)
	}
	if len(c.SSHKeys) > 0 {
		v.Set("sshkeys", EncodeSSHKeys(c.SSHKeys))
	}
	if c.Start {
		v.Set("start", "1")
	}
	if c.Pool != "" {
		v.Set("pool", c.Pool)
	}
	return v
}

// EncodeSSHKeys is the sshkeys value of a VM config: the keys one a line,
// percent-encoded as qemu-server expects (URI escaping with %20 for a
// space, not '+'; it decodes with uri_unescape).
func EncodeSSHKeys(keys []string) string {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(strings.ReplaceAll(url.QueryEscape(strings.TrimSpace(k)), "+", "%20"))
		b.WriteString("%0A")
	}
	return b.String()
}

// DecodeSSHKeys is EncodeSSHKeys undone: the keys of an sshkeys value,
// without empty lines.
func DecodeSSHKeys(s string) ([]string, error) {
	plain, err := url.PathUnescape(s)
	if err != nil {
		return nil, fmt.Errorf("sshkeys: %w", err)
	}
	var out []string
	for _, line := range strings.Split(plain, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// VMConfigUpdate is the body of PUT (synchronous) or POST (a task) of
// /nodes/{node}/qemu/{vmid}/config. Set holds keys in PVE's spelling
// (sshkeys already encoded); Delete and Revert name keys; Digest makes
// PVE refuse the write when the config changed since it was read.
type VMConfigUpdate struct {
	Set    map[string]string
	Delete []string
	Revert []string
	Digest string
	// Force frees a deleted drive's volume instead of keeping it as
	// unusedN (PVE's force=1).
	Force bool
}

// Encode is the form body.
func (u *VMConfigUpdate) Encode() url.Values {
	v := url.Values{}
	for k, s := range u.Set {
		v.Set(k, s)
	}
	setEdits(v, u.Delete, u.Revert, u.Digest)
	if u.Force {
		v.Set("force", "1")
	}
	return v
}

// VMStatus is GET …/qemu/{vmid}/status/current, the fields corral reads.
type VMStatus struct {
	VMID      int    `json:"vmid"`
	Status    string `json:"status"`    // running | stopped
	QMPStatus string `json:"qmpstatus"` // running, paused, …
	Name      string `json:"name"`
	Lock      string `json:"lock"`
	Agent     Bool01 `json:"agent"`
	MaxMem    int64  `json:"maxmem"`
	MaxDisk   int64  `json:"maxdisk"`
	Tags      string `json:"tags"`
	// HA says whether the VM is an HA resource (not ignored), and its
	// service state.
	HA HAStatus `json:"ha"`
}

// CreateVM sends POST /nodes/{node}/qemu and returns the task's UPID.
func (c *Client) CreateVM(ctx context.Context, node string, vc *VMCreate) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu", node), vc.Encode())
	if err != nil {
		return "", fmt.Errorf("create vm %d: %w", vc.VMID, err)
	}
	return upid, nil
}

// VMConfigOf returns GET …/qemu/{vmid}/config: with current=false the
// pending values are merged in, with current=true what is in effect.
func (c *Client) VMConfigOf(ctx context.Context, node string, vmid int, current bool) (*VMConfig, error) {
	var q url.Values
	if current {
		q = url.Values{"current": {"1"}}
	}
	var out VMConfig
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/qemu/%d/config", node, vmid), q, &out); err != nil {
		return nil, fmt.Errorf("vm %d config: %w", vmid, err)
	}
	return &out, nil
}

// UpdateVMConfig sends PUT …/qemu/{vmid}/config: synchronous, answered
// null. A change that needs a restart waits in the pending section.
func (c *Client) UpdateVMConfig(ctx context.Context, node string, vmid int, u *VMConfigUpdate) error {
	if _, err := c.call(ctx, http.MethodPut, pathf("/nodes/%s/qemu/%d/config", node, vmid), u.Encode(), nil); err != nil {
		return fmt.Errorf("update vm %d config: %w", vmid, err)
	}
	return nil
}

// VMStatusOf returns GET …/qemu/{vmid}/status/current.
func (c *Client) VMStatusOf(ctx context.Context, node string, vmid int) (*VMStatus, error) {
	var out VMStatus
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/qemu/%d/status/current", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("vm %d status: %w", vmid, err)
	}
	return &out, nil
}

// StartVM sends POST …/status/start.
func (c *Client) StartVM(ctx context.Context, node string, vmid int) (string, error) {
	return c.vmPower(ctx, node, vmid, "start", nil)
}

// StopVM sends POST …/status/stop: an immediate stop.
func (c *Client) StopVM(ctx context.Context, node string, vmid int) (string, error) {
	return c.vmPower(ctx, node, vmid, "stop", nil)
}

// ShutdownVM sends POST …/status/shutdown: through the guest agent when
// the VM has one, else an ACPI power button press.
func (c *Client) ShutdownVM(ctx context.Context, node string, vmid int, opts ShutdownOptions) (string, error) {
	q := url.Values{}
	if opts.Timeout > 0 {
		q.Set("timeout", strconv.Itoa(opts.Timeout))
	}
	if opts.ForceStop {
		q.Set("forceStop", "1")
	}
	return c.vmPower(ctx, node, vmid, "shutdown", q)
}

func (c *Client) vmPower(ctx context.Context, node string, vmid int, action string, params url.Values) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu/%d/status/%s", node, vmid, action), params)
	if err != nil {
		return "", fmt.Errorf("%s vm %d: %w", action, vmid, err)
	}
	return upid, nil
}

// DestroyVM sends DELETE /nodes/{node}/qemu/{vmid}. PVE refuses a running
// VM; with DestroyUnreferencedDisks (PVE's default) it also frees the
// images of this VMID its config does not name.
func (c *Client) DestroyVM(ctx context.Context, node string, vmid int, opts DestroyOptions) (string, error) {
	q := url.Values{}
	if opts.Purge {
		q.Set("purge", "1")
	}
	if opts.DestroyUnreferencedDisks != nil {
		q.Set("destroy-unreferenced-disks", bit(*opts.DestroyUnreferencedDisks))
	}
	upid, err := c.startTask(ctx, http.MethodDelete, pathf("/nodes/%s/qemu/%d", node, vmid), q)
	if err != nil {
		return "", fmt.Errorf("destroy vm %d: %w", vmid, err)
	}
	return upid, nil
}

// ResizeVM sends PUT …/qemu/{vmid}/resize for disk (scsi0 …) to size
// ("16G", or "+2G"); PVE answers a task's UPID. Disks only grow.
func (c *Client) ResizeVM(ctx context.Context, node string, vmid int, disk, size string) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPut, pathf("/nodes/%s/qemu/%d/resize", node, vmid), url.Values{"disk": {disk}, "size": {size}})
	if err != nil {
		return "", fmt.Errorf("resize vm %d %s: %w", vmid, disk, err)
	}
	return upid, nil
}

// AgentPing sends POST …/agent/ping: nil when the guest agent answers.
func (c *Client) AgentPing(ctx context.Context, node string, vmid int) error {
	if _, err := c.call(ctx, http.MethodPost, pathf("/nodes/%s/qemu/%d/agent/ping", node, vmid), nil, nil); err != nil {
		return fmt.Errorf("vm %d agent ping: %w", vmid, err)
	}
	return nil
}

// AgentInterfaces returns GET …/agent/network-get-interfaces: the guest's
// network devices and addresses as its agent reports them.
func (c *Client) AgentInterfaces(ctx context.Context, node string, vmid int) ([]Interface, error) {
	var out struct {
		Result []Interface `json:"result"`
	}
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/qemu/%d/agent/network-get-interfaces", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("vm %d agent network-get-interfaces: %w", vmid, err)
	}
	return out.Result, nil
}
