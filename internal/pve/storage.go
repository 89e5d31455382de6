package pve

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// StorageList returns GET /nodes/{node}/storage, only storages that allow
// content ("rootdir", "vztmpl", …) unless content is "".
func (c *Client) StorageList(ctx context.Context, node, content string) ([]Storage, error) {
	if content == "" {
		return memoSlice(ctx, c, "storages "+node, func(ctx context.Context) ([]Storage, error) { return c.readStorageList(ctx, node, "") })
	}
	return c.readStorageList(ctx, node, content)
}

func (c *Client) readStorageList(ctx context.Context, node, content string) ([]Storage, error) {
	var q url.Values
	if content != "" {
		q = url.Values{"content": {content}}
	}
	var out []Storage
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/storage", node), q, &out); err != nil {
		return nil, fmt.Errorf("list storages on %s: %w", node, err)
	}
	return out, nil
}

// StorageStatus returns GET /nodes/{node}/storage/{storage}/status.
func (c *Client) StorageStatus(ctx context.Context, node, storage string) (*StorageStatus, error) {
	var out StorageStatus
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/storage/%s/status", node, storage), nil, &out); err != nil {
		return nil, fmt.Errorf("storage %s status: %w", storage, err)
	}
	return &out, nil
}

// StorageContent returns GET /nodes/{node}/storage/{storage}/content,
// filtered by content type ("" for all) and owner vmid (0 for all).
func (c *Client) StorageContent(ctx context.Context, node, storage, content string, vmid int) ([]Volume, error) {
	if content == "vztmpl" && vmid == 0 && c.memo != nil && !c.memo.templatesWritten() {
		return memoSlice(ctx, c, "vztmpl:"+node+"/"+storage, func(ctx context.Context) ([]Volume, error) {
			return c.readContent(ctx, node, storage, content, vmid)
		})
	}
	return c.readContent(ctx, node, storage, content, vmid)
}

// readContent is one GET …/storage/{storage}/content.
func (c *Client) readContent(ctx context.Context, node, storage, content string, vmid int) ([]Volume, error) {
	q := url.Values{}
	if content != "" {
		q.Set("content", content)
	}
	if vmid != 0 {
		q.Set("vmid", strconv.Itoa(vmid))
	}
	var out []Volume
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/storage/%s/content", node, storage), q, &out); err != nil {
		return nil, fmt.Errorf("list storage %s content: %w", storage, err)
	}
	return out, nil
}

// VolumeInfo returns GET …/content/{volume} for a volid such as
// "local-lvm:vm-900-disk-1"; a missing volume is IsNotFound.
func (c *Client) VolumeInfo(ctx context.Context, node, storage, volid string) (*VolumeInfo, error) {
	var out VolumeInfo
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/storage/%s/content/%s", node, storage, volid), nil, &out); err != nil {
		return nil, fmt.Errorf("volume %s: %w", volid, err)
	}
	return &out, nil
}

// DeleteVolume sends DELETE …/content/{volume}. PVE deletes in a task and
// returns its UPID; an older or different storage may answer null, in
// which case the deletion is already done and the UPID is "". Nothing
// checks whether a guest still references the volume (behaviour.md
// "Storage content").
func (c *Client) DeleteVolume(ctx context.Context, node, storage, volid string) (string, error) {
	var upid string
	if _, err := c.call(ctx, http.MethodDelete, pathf("/nodes/%s/storage/%s/content/%s", node, storage, volid), nil, &upid); err != nil {
		return "", fmt.Errorf("delete volume %s: %w", volid, err)
	}
	return upid, nil
}

// AllocVolume sends POST …/content to allocate filename (e.g.
// "vm-900-disk-3") of size ("8G") owned by vmid, and returns the new volid.
// It is synchronous.
func (c *Client) AllocVolume(ctx context.Context, node, storage string, vmid int, filename, size string) (string, error) {
	q := url.Values{"vmid": {strconv.Itoa(vmid)}, "filename": {filename}, "size": {size}}
	var volid string
	if _, err := c.call(ctx, http.MethodPost, pathf("/nodes/%s/storage/%s/content", node, storage), q, &volid); err != nil {
		return "", fmt.Errorf("allocate volume %s on %s: %w", filename, storage, err)
	}
	return volid, nil
}

// Aplinfo returns GET /nodes/{node}/aplinfo: the appliance templates the
// node can download.
func (c *Client) Aplinfo(ctx context.Context, node string) ([]Appliance, error) {
	var out []Appliance
	if _, err := c.call(ctx, http.MethodGet, pathf("/nodes/%s/aplinfo", node), nil, &out); err != nil {
		return nil, fmt.Errorf("list appliances on %s: %w", node, err)
	}
	return out, nil
}

// DownloadAppliance sends POST /nodes/{node}/aplinfo to download template
// (an Appliance.Template name) to storage, and returns the task's UPID. It
// needs Datastore.AllocateTemplate on /storage/{storage}.
func (c *Client) DownloadAppliance(ctx context.Context, node, storage, template string) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/aplinfo", node), url.Values{"storage": {storage}, "template": {template}})
	if err != nil {
		return "", fmt.Errorf("download template %s: %w", template, err)
	}
	return upid, nil
}

// Download is the body of POST …/storage/{storage}/download-url
// (DownloadURL): fetch URL into the storage as Filename, of Content type
// ("vztmpl", "iso"), checked against Checksum when set.
type Download struct {
	URL               string
	Content           string
	Filename          string
	Checksum          string
	ChecksumAlgorithm string // "sha256", "sha512", …
}

// Encode is the form body.
func (d *Download) Encode() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"url": d.URL, "content": d.Content, "filename": d.Filename,
		"checksum": d.Checksum, "checksum-algorithm": d.ChecksumAlgorithm} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// DownloadURL sends POST …/download-url and returns the task's UPID.
func (c *Client) DownloadURL(ctx context.Context, node, storage string, d *Download) (string, error) {
	upid, err := c.startTask(ctx, http.MethodPost, pathf("/nodes/%s/storage/%s/download-url", node, storage), d.Encode())
	if err != nil {
		return "", fmt.Errorf("download %s to %s: %w", d.Filename, storage, err)
	}
	return upid, nil
}
