package model

import (
	"fmt"
	"os"
	"path/filepath"
)

// OfferImportVolume makes the file src a volume <sid>:import/<name> of
// content 'import' on every node that has storage sid, as a disk image
// uploaded to a storage's import/ directory is on PVE 8.2+: the source
// an import-from may name. The volume's data is a symbolic link to src
// (the emulator's cached VM image, which no one writes). An existing
// volume of that name is left as it is.
func (q *vmCreator) OfferImportVolume(sid, name, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("offer %s as an import volume: %w", src, err)
	}
	q.stateMu.Lock()
	defer q.stateMu.Unlock()
	st := q.state()
	vname := "import/" + name
	for _, n := range st.Nodes {
		s := st.storage(sid)
		if s == nil || !s.OnNode(n.Name) || st.Volumes[st.volKey(n.Name, sid+":"+vname)] != nil {
			continue
		}
		path := q.storage.volumePath(n.Name, sid, vname)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("offer %s: %w", vname, err)
		}
		os.Remove(path)
		if err := os.Symlink(src, path); err != nil {
			return fmt.Errorf("offer %s: %w", vname, err)
		}
		q.storage.addVolumeLocked(n.Name, &Volume{Node: st.homeNode(n.Name, sid), Storage: sid, Name: vname,
			Size: fi.Size(), Format: "qcow2", Content: "import", Ctime: q.clock().Unix()})
	}
	return q.journal.saveLocked()
}
