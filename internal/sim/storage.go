package sim

import (
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Storage routes (pve-storage API2/Storage/Status.pm and Content.pm).

func (a *storageAPI) getStorages(r *request) (any, error) {
	usages, err := a.cluster.Storages(r.params["node"])
	if err != nil {
		return nil, err
	}
	want := r.params["content"]
	out := []map[string]any{}
	for _, u := range usages {
		st := u.Storage
		if r.params["storage"] != "" && st.ID != r.params["storage"] {
			continue
		}
		if want != "" && !hasAnyContent(st, want) {
			continue
		}
		if !a.cluster.HasAnyPriv(r.auth, "/storage/"+st.ID) {
			continue
		}
		out = append(out, storageRow(u))
	}
	return out, nil
}

func hasAnyContent(st *model.Storage, list string) bool {
	for _, c := range strings.Split(list, ",") {
		if st.HasContent(c) {
			return true
		}
	}
	return false
}

func storageRow(u model.StorageUsage) map[string]any {
	st := u.Storage
	avail := u.Total - u.Used
	if avail < 0 {
		avail = 0
	}
	frac := 0.0
	if u.Total > 0 {
		frac = float64(u.Used) / float64(u.Total)
	}
	return map[string]any{
		"storage": st.ID, "type": st.Type, "content": strings.Join(st.Content, ","),
		"active": 1, "enabled": 1, "shared": b2i(st.Shared),
		"total": u.Total, "used": u.Used, "avail": avail, "used_fraction": frac,
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (a *storageAPI) getStorageStatus(r *request) (any, error) {
	u, err := a.cluster.StorageStatus(r.params["node"], r.params["storage"])
	if err != nil {
		return nil, err
	}
	return storageRow(u), nil
}

func (a *storageAPI) getContent(r *request) (any, error) {
	entries, err := a.cluster.Content(r.params["node"], r.params["storage"], r.params["content"], intParam(r, "vmid"))
	if err != nil {
		return nil, err
	}
	out := []map[string]any{}
	for _, e := range entries {
		out = append(out, contentRow(e))
	}
	return out, nil
}

// contentRow renders one content entry with PVE's field types: for LVM
// thin volumes ctime stays a string (it comes from lvs output), for files
// it is an integer (fixtures storage-content-*.json).
func contentRow(e model.ContentEntry) map[string]any {
	row := map[string]any{"volid": e.VolID(), "format": e.Format, "size": e.Size, "content": e.ContentType}
	switch e.ContentType {
	case "images", "rootdir":
		row["vmid"] = e.Owner
		row["ctime"] = itoa(int(e.Ctime))
	default:
		row["ctime"] = e.Ctime
		if e.Owner != 0 {
			row["vmid"] = e.Owner
		}
		if e.ContentType == "backup" {
			row["subtype"] = "lxc"
			if strings.Contains(e.Name, "vzdump-qemu-") {
				row["subtype"] = "qemu"
			}
		}
	}
	if e.Notes != "" {
		row["notes"] = e.Notes
	}
	if e.Protected {
		row["protected"] = 1
	}
	return row
}

func (a *storageAPI) postContent(r *request) (any, error) {
	return a.cluster.AllocVolume(r.auth, r.params["node"], r.params["storage"], bodyParams(r, "node", "storage"))
}

func (a *storageAPI) getVolume(r *request) (any, error) {
	volid := r.params["volume"]
	if !strings.Contains(volid, ":") {
		volid = r.params["storage"] + ":" + volid
	}
	e, err := a.cluster.VolumeInfo(r.params["node"], volid)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": "/dev/pve/" + e.Name, "size": e.Size, "used": e.Size, "format": e.Format}, nil
}

func (a *storageAPI) deleteVolume(r *request) (any, error) {
	return a.cluster.DeleteVolume(r.auth, r.params["node"], r.params["storage"], r.params["volume"], bodyParams(r, "node", "storage", "volume"))
}

func (a *storageAPI) postDownloadURL(r *request) (any, error) {
	return a.cluster.DownloadURL(r.auth, r.params["node"], r.params["storage"], bodyParams(r, "node", "storage"))
}

func (a *storageAPI) getQueryURLMetadata(r *request) (any, error) {
	return a.cluster.URLMetadata(r.params["node"], r.params["url"])
}

func (a *storageAPI) getAplinfo(r *request) (any, error) {
	var out []map[string]any
	for _, ap := range a.cluster.Aplinfo(r.params["node"]) {
		out = append(out, map[string]any{
			"template": ap.Template, "os": ap.OS, "version": ap.Version, "section": ap.Section,
			"package": ap.Package, "headline": ap.Headline, "description": ap.Description,
			"type": "lxc", "location": ap.URL(), "source": "http://download.proxmox.com/images", "architecture": ap.Architecture,
			"sha512sum": a.cluster.ApplianceSHA512(ap),
		})
	}
	return out, nil
}

func (a *storageAPI) postAplinfo(r *request) (any, error) {
	return a.cluster.DownloadAppliance(r.auth, r.params["node"], bodyParams(r, "node"))
}
