package model

import (
	"fmt"
	"slices"
)

// Shared storage kinds the emulator can add (Options.SharedStorage). PVE
// forces shared=1 on both types (pve-storage Plugin.pm @SHARED_STORAGE);
// the emulator keeps one copy of their volumes that every node sees
// (sharedNode), which is what makes a CT's volumes usable from any node
// without a copy (behaviour.md (i.3), (i.4)).
const (
	SharedNFS = "nfs"
	SharedRBD = "rbd"
)

// sharedStorageDef is the storage.cfg entry of a shared storage kind.
// The NFS export also takes backups (content backup, as NFS storages in
// PVE commonly do): the backup storage every node can read, so an archive
// made on one node restores on another.
func sharedStorageDef(kind string) (*Storage, error) {
	switch kind {
	case SharedNFS:
		return &Storage{ID: "nfs", Type: "nfs", Content: []string{"images", "rootdir", "backup"}, Path: "/mnt/pve/nfs", Shared: true, Total: 1024 * gib}, nil
	case SharedRBD:
		return &Storage{ID: "rbd", Type: "rbd", Content: []string{"images", "rootdir"}, Pool: "rbd", Shared: true, Total: 1024 * gib}, nil
	}
	return nil, fmt.Errorf("model: unknown shared storage %q (want %s or %s)", kind, SharedNFS, SharedRBD)
}

// CheckSharedStorage validates a shared storage kind for flag parsing.
func CheckSharedStorage(kind string) error {
	_, err := sharedStorageDef(kind)
	return err
}

// addSharedStorages adds the storages opts.SharedStorage asks for that st
// lacks (a state made without them, or before they existed), so an
// emulator can be reopened with more. It reports whether it added any.
func addSharedStorages(st *State, kinds []string) (bool, error) {
	added := false
	for _, kind := range kinds {
		def, err := sharedStorageDef(kind)
		if err != nil {
			return false, err
		}
		if st.storage(def.ID) != nil {
			continue
		}
		st.Storages = append(st.Storages, def)
		added = true
	}
	return added, nil
}

// SharedStorages lists the ids of the shared storages, in storage.cfg order.
func (sl *storageLayer) SharedStorages() []string {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	var out []string
	for _, s := range st.Storages {
		if s.Shared {
			out = append(out, s.ID)
		}
	}
	return slices.Clip(out)
}
