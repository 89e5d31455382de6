package model

// StorageIDs lists the storages of storage.cfg in its order, on any node,
// disabled ones too: what GET /storage walks (PVE::Storage::storage_ids).
func (sl *storageLayer) StorageIDs() []string {
	st := sl.state()
	sl.stateMu.RLock()
	defer sl.stateMu.RUnlock()
	out := make([]string, 0, len(st.Storages))
	for _, s := range st.Storages {
		out = append(out, s.ID)
	}
	return out
}
