package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// VMDiskReassign is POST /nodes/{node}/qemu/{vmid}/move_disk with
// target-vmid: qemu-server renames the disk's volume for the target VM
// (vm-<target>-disk-K) and moves it from Disk of the source's config to
// TargetDisk of the target's, in one task under both config locks. Both
// VMs must be on the node and not templates, the source stopped (unless
// Disk is unusedN); a disk a snapshot names cannot go, nor a CD drive's
// contents. A disk cannot be reassigned between a VM and a container.
// Digest and TargetDigest make PVE refuse the move when either config
// changed since it was read.
type VMDiskReassign struct {
	Disk         string
	TargetVMID   int
	TargetDisk   string
	Digest       string
	TargetDigest string
}

// Encode is the form body.
func (m *VMDiskReassign) Encode() url.Values {
	v := url.Values{"disk": {m.Disk}, "target-vmid": {strconv.Itoa(m.TargetVMID)}}
	if m.TargetDisk != "" {
		v.Set("target-disk", m.TargetDisk)
	}
	if m.Digest != "" {
		v.Set("digest", m.Digest)
	}
	if m.TargetDigest != "" {
		v.Set("target-digest", m.TargetDigest)
	}
	return v
}

// ReassignVMDisk sends the reassign and returns the qmmove task's UPID.
func (c *Client) ReassignVMDisk(ctx context.Context, node string, vmid int, m *VMDiskReassign) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/qemu/%d/move_disk", node, vmid), m.Encode())
	if err != nil {
		return "", fmt.Errorf("move vm %d disk %s to vm %d as %s: %w", vmid, m.Disk, m.TargetVMID, m.TargetDisk, err)
	}
	return upid, nil
}
