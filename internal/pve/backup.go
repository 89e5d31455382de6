package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Backups (POST /nodes/{node}/vzdump), restores (POST /nodes/{node}/lxc
// with restore=1) and snapshots (/nodes/{node}/lxc/{vmid}/snapshot).
// Every method that returns a string returns a UPID. A vzdump task can
// fail after an HTTP 200 — PVE checks VM.Backup inside the task (seed 004
// §3.5) — so only WaitTask's result says whether a backup exists.

// BackupOptions are the vzdump parameters for one guest. Zero fields
// leave PVE's defaults.
type BackupOptions struct {
	// Mode is snapshot (PVE's default), stop or suspend. A stopped CT is
	// always backed up in stop mode.
	Mode string
	// Storage is the target; it must allow content "backup". "" means
	// PVE's default ("local"), and skips the Datastore.AllocateSpace
	// check the request makes for an explicit storage.
	Storage string
	// Compress is 0, 1, gzip, lzo or zstd.
	Compress string
	// NotesTemplate becomes the archive's notes; {{guestname}},
	// {{vmid}}, {{node}} and {{cluster}} are replaced.
	NotesTemplate string
	// Protected marks the archive so no prune removes it.
	Protected bool
	// PruneBackups is a retention such as "keep-last=3"; it needs
	// Datastore.Allocate on the storage.
	PruneBackups string
	// Remove, when set, overrides PVE's default of pruning older backups
	// by the retention (1).
	Remove *bool
}

// Backup sends POST /nodes/{node}/vzdump for vmid and returns the task's
// UPID (task type "vzdump", id the vmid). The archive's volid is only
// known from the storage content once the task has ended OK. If the guest
// is on another node PVE starts nothing and answers "OK"; Backup makes
// that an error.
func (c *Client) Backup(ctx context.Context, node string, vmid int, opts BackupOptions) (string, error) {
	q := url.Values{"vmid": {strconv.Itoa(vmid)}}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("mode", opts.Mode)
	set("storage", opts.Storage)
	set("compress", opts.Compress)
	set("notes-template", opts.NotesTemplate)
	set("prune-backups", opts.PruneBackups)
	if opts.Protected {
		q.Set("protected", "1")
	}
	if opts.Remove != nil {
		q.Set("remove", bit(*opts.Remove))
	}
	var upid string
	if _, err := c.call(ctx, http.MethodPost, pathf("/nodes/%s/vzdump", node), q, &upid); err != nil {
		return "", fmt.Errorf("back up ct %d: %w", vmid, err)
	}
	switch {
	case upid == "OK":
		// PVE's silent exit: the guest runs on another node.
		return "", fmt.Errorf("back up ct %d: it is not on node %s, so PVE started no backup; send the request to the node it runs on", vmid, node)
	case upid == "":
		return "", fmt.Errorf("back up ct %d: %w", vmid, ErrNoUPID)
	}
	return upid, nil
}

// Backups lists the backup archives on storage (GET …/content with
// content=backup), of vmid only unless vmid is 0.
func (c *Client) Backups(ctx context.Context, node, storage string, vmid int) ([]Volume, error) {
	return c.StorageContent(ctx, node, storage, "backup", vmid)
}

// BackupConfig returns GET /nodes/{node}/vzdump/extractconfig: the guest
// config stored in the archive volid, as the config file's text. It needs
// VM.Backup on the backed-up guest and access to the storage.
func (c *Client) BackupConfig(ctx context.Context, node, volid string) (string, error) {
	var out string
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/vzdump/extractconfig", node), url.Values{"volume": {volid}}, &out); err != nil {
		return "", fmt.Errorf("read config of backup %s: %w", volid, err)
	}
	if len(out) > maxGuestConfig {
		return "", fmt.Errorf("read config of backup %s: %d bytes, more than the %d bytes a guest config can be: is it a container backup?", volid, len(out), maxGuestConfig)
	}
	return out, nil
}

// maxGuestConfig bounds an archive's config (issue 27): pmxcfs keeps no
// file over 1 MiB under /etc/pve, so no guest config is larger.
const maxGuestConfig = 1 << 20

// RestoreOptions tune RestoreContainer.
type RestoreOptions struct {
	// Storage receives the recreated volumes; "" is PVE's default
	// "local", which usually cannot hold containers.
	Storage string
	// Force overwrites an existing, stopped CT vmid (its volumes are
	// destroyed). VM.Backup on the CT is enough for that; a new VMID needs
	// VM.Allocate.
	Force bool
	// Unique gives every NIC a new MAC, so the copy can run beside the
	// original (a restore otherwise keeps MAC and hostname).
	Unique bool
	// Start starts the CT once restored.
	Start bool
	// Config overrides keys of the backed-up config (hostname, net0, …);
	// its Delete, Revert and Digest are not sent. Giving mpN replaces the
	// storage-only mode, in which every backed-up volume is recreated
	// empty with its old size.
	Config *ConfigUpdate
}

// RestoreContainer sends POST /nodes/{node}/lxc with ostemplate=archive
// and restore=1 and returns the UPID of task vzrestore.
func (c *Client) RestoreContainer(ctx context.Context, node string, vmid int, archive string, opts RestoreOptions) (string, error) {
	var cfg ConfigUpdate
	if opts.Config != nil {
		cfg = *opts.Config
	}
	cfg.Delete, cfg.Revert, cfg.Digest = nil, nil, ""
	q := cfg.Encode()
	q.Set("vmid", strconv.Itoa(vmid))
	q.Set("ostemplate", archive)
	q.Set("restore", "1")
	if opts.Storage != "" {
		q.Set("storage", opts.Storage)
	}
	if opts.Force {
		q.Set("force", "1")
	}
	if opts.Unique {
		q.Set("unique", "1")
	}
	if opts.Start {
		q.Set("start", "1")
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc", node), q)
	if err != nil {
		return "", fmt.Errorf("restore ct %d from %s: %w", vmid, archive, err)
	}
	return upid, nil
}

// Snapshot is one entry of GET …/snapshot. The last entry is always
// "current", the config now: its Parent is the snapshot it descends from.
type Snapshot struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	SnapTime    IntOrString `json:"snaptime,omitempty"`
	Parent      string      `json:"parent,omitempty"`
	// SnapState is set while a snapshot is being made or deleted
	// ("prepare", "delete"); such a snapshot cannot be rolled back to.
	SnapState string `json:"snapstate,omitempty"`
	// VMState is a VM snapshot's: it holds the RAM too (vmstate), and a
	// rollback resumes the VM where it was rather than booting it.
	VMState Bool01 `json:"vmstate,omitempty"`
	// Running and Digest are set on the "current" entry.
	Running Bool01 `json:"running,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// Snapshots returns GET /nodes/{node}/lxc/{vmid}/snapshot.
func (c *Client) Snapshots(ctx context.Context, node string, vmid int) ([]Snapshot, error) {
	var out []Snapshot
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/snapshot", node, vmid), nil, &out); err != nil {
		return nil, fmt.Errorf("ct %d snapshots: %w", vmid, err)
	}
	return out, nil
}

// CreateSnapshot sends POST …/snapshot and returns the UPID of task
// vzsnapshot. Only LVM-thin (and other snapshot-capable) volumes can be
// snapshotted; otherwise the task fails "snapshot feature is not
// available". A running CT need not stop.
func (c *Client) CreateSnapshot(ctx context.Context, node string, vmid int, name, description string) (string, error) {
	q := url.Values{"snapname": {name}}
	if description != "" {
		q.Set("description", description)
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc/%d/snapshot", node, vmid), q)
	if err != nil {
		return "", fmt.Errorf("snapshot ct %d as %s: %w", vmid, name, err)
	}
	return upid, nil
}

// DeleteSnapshot sends DELETE …/snapshot/{snapname} and returns the UPID
// of task vzdelsnapshot. force drops the config section even when
// removing a volume snapshot fails.
func (c *Client) DeleteSnapshot(ctx context.Context, node string, vmid int, name string, force bool) (string, error) {
	var q url.Values
	if force {
		q = url.Values{"force": {"1"}}
	}
	upid, err := c.startTask(ctx, http.MethodDelete, pathf("/nodes/%s/lxc/%d/snapshot/%s", node, vmid, name), q)
	if err != nil {
		return "", fmt.Errorf("delete snapshot %s of ct %d: %w", name, vmid, err)
	}
	return upid, nil
}

// RollbackSnapshot sends POST …/snapshot/{snapname}/rollback and returns
// the UPID of task vzrollback. A running CT is stopped hard first; with
// start it is started again afterwards.
func (c *Client) RollbackSnapshot(ctx context.Context, node string, vmid int, name string, start bool) (string, error) {
	var q url.Values
	if start {
		q = url.Values{"start": {"1"}}
	}
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/lxc/%d/snapshot/%s/rollback", node, vmid, name), q)
	if err != nil {
		return "", fmt.Errorf("roll ct %d back to %s: %w", vmid, name, err)
	}
	return upid, nil
}

// SnapshotConfig returns GET …/snapshot/{snapname}/config: the config the
// snapshot holds, with its snaptime and description among the Values.
func (c *Client) SnapshotConfig(ctx context.Context, node string, vmid int, name string) (*ContainerConfig, error) {
	var out ContainerConfig
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/lxc/%d/snapshot/%s/config", node, vmid, name), nil, &out); err != nil {
		return nil, fmt.Errorf("config of snapshot %s of ct %d: %w", name, vmid, err)
	}
	return &out, nil
}

// SetSnapshotDescription sends PUT …/snapshot/{snapname}/config. It is
// synchronous.
func (c *Client) SetSnapshotDescription(ctx context.Context, node string, vmid int, name, description string) error {
	q := url.Values{"description": {description}}
	if _, err := c.call(ctx, http.MethodPut, pathf("/nodes/%s/lxc/%d/snapshot/%s/config", node, vmid, name), q, nil); err != nil {
		return fmt.Errorf("describe snapshot %s of ct %d: %w", name, vmid, err)
	}
	return nil
}
