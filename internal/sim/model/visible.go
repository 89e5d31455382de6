package model

import "strings"

// Visible reports, for each of paths, whether auth holds priv there, or
// any privilege when priv is "": the filter PVE applies to lists such as
// /cluster/resources (any privilege) and /nodes/{node}/lxc (VM.Audit).
// It answers a thousand guests under one read lock and computes the
// privileges once per class of paths: a path without ACL entries of its
// own holds what its siblings without entries hold, since only the
// entries on a path and its ancestors count.
func (cv *clusterView) Visible(auth Auth, paths []string, priv string) []bool {
	st := cv.state()
	cv.stateMu.RLock()
	defer cv.stateMu.RUnlock()
	a := st.Access
	id := auth.ID()
	own := map[string]bool{} // normalized paths that carry ACL entries
	for _, e := range a.ACL {
		own["/"+strings.Join(aclSplitPath(e.Path), "/")] = true
	}
	byParent := map[string]map[string]bool{}
	out := make([]bool, len(paths))
	for i, p := range paths {
		comps := aclSplitPath(p)
		norm := "/" + strings.Join(comps, "/")
		var privs map[string]bool
		if own[norm] || len(comps) == 0 {
			privs = a.privileges(id, p)
		} else {
			parent := "/" + strings.Join(comps[:len(comps)-1], "/")
			var ok bool
			if privs, ok = byParent[parent]; !ok {
				privs = a.privileges(id, p)
				byParent[parent] = privs
			}
		}
		if priv == "" {
			out[i] = len(privs) > 0
		} else {
			_, out[i] = privs[priv]
		}
	}
	return out
}
