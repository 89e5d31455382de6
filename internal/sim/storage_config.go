package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Storage configuration routes (pve-storage API2/Storage/Config.pm): the
// cluster's storage.cfg, read only. Ansible's proxmox_storage_info reads
// them.

// getStorageIndex is GET /storage: every storage the caller has
// Datastore.Audit or Datastore.AllocateSpace on, of type= if given, as
// api_storage_config renders it.
func (a *storageAPI) getStorageIndex(r *request) (any, error) {
	cfgs, digest := a.storageConfigs()
	out := []map[string]any{}
	for _, st := range cfgs {
		if !a.cluster.HasPriv(r.auth, "/storage/"+st.ID, "Datastore.Audit") &&
			!a.cluster.HasPriv(r.auth, "/storage/"+st.ID, "Datastore.AllocateSpace") {
			continue
		}
		if t := r.params["type"]; t != "" && t != st.Type {
			continue
		}
		out = append(out, storageConfigRow(st, digest))
	}
	return out, nil
}

// getStorageConfig is GET /storage/{storage} (Datastore.Allocate on it,
// checked by the schema); an unknown one fails as storage_config does.
func (a *storageAPI) getStorageConfig(r *request) (any, error) {
	cfgs, digest := a.storageConfigs()
	sid := r.params["storage"]
	i := slices.IndexFunc(cfgs, func(s *model.Storage) bool { return s.ID == sid })
	if i < 0 {
		return nil, model.Failf("storage '%s' does not exist\n", sid)
	}
	return storageConfigRow(cfgs[i], digest), nil
}

// storageConfigs is storage.cfg's entries in order and the file's digest.
func (a *storageAPI) storageConfigs() ([]*model.Storage, string) {
	var cfgs []*model.Storage
	for _, id := range a.cluster.StorageIDs() {
		if s := a.cluster.StorageConfig(id); s != nil {
			cfgs = append(cfgs, s)
		}
	}
	sum := sha1.Sum([]byte(storageCfgText(cfgs)))
	return cfgs, hex.EncodeToString(sum[:])
}

// storageConfigRow is api_storage_config: the section's keys, storage,
// the file's digest, content and nodes as comma lists.
func storageConfigRow(st *model.Storage, digest string) map[string]any {
	row := map[string]any{"storage": st.ID, "type": st.Type, "digest": digest}
	for k, v := range storageCfgKeys(st) {
		row[k] = v
	}
	return row
}

// storageCfgKeys are a storage's properties as storage.cfg holds them
// (the content list sorted, which PVE's hash order does not promise).
func storageCfgKeys(st *model.Storage) map[string]any {
	keys := map[string]any{"content": strings.Join(slices.Sorted(slices.Values(st.Content)), ",")}
	if len(st.Content) == 0 {
		keys["content"] = "none"
	}
	switch st.Type {
	case "dir", "nfs":
		keys["path"] = st.Path
	case "lvmthin":
		keys["vgname"], keys["thinpool"] = st.VGName, st.Pool
	case "rbd":
		keys["pool"] = st.Pool
	}
	if len(st.Nodes) > 0 {
		keys["nodes"] = strings.Join(st.Nodes, ",")
	}
	if st.Disable {
		keys["disable"] = 1
	}
	if st.Shared && st.Type == "dir" {
		keys["shared"] = 1
	}
	return keys
}

// storageCfgText renders storage.cfg as SectionConfig writes it, for its
// digest: "type: id" and then a tab-indented line per property.
func storageCfgText(cfgs []*model.Storage) string {
	var b strings.Builder
	for _, st := range cfgs {
		fmt.Fprintf(&b, "%s: %s\n", st.Type, st.ID)
		keys := storageCfgKeys(st)
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			fmt.Fprintf(&b, "\t%s %v\n", k, keys[k])
		}
		b.WriteString("\n")
	}
	return b.String()
}
