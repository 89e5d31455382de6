package model

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestVMArchive_roundTrip: the VMA stand-in keeps a disk's bytes exactly
// (data at a cluster's edge, a last cluster shorter than 64 KiB) and
// stores only the clusters with data.
func TestVMArchive_roundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := filepath.Join(dir, "disk")
	const size = 10*vmaCluster + 1234
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	writes := map[int64][]byte{0: []byte("first"), vmaCluster - 2: []byte("edge"), size - 3: []byte("end")}
	for off, b := range writes {
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
	}
	f.Truncate(size)
	f.Close()
	for _, comp := range []string{"", "zstd", "gzip"} {
		dst := filepath.Join(dir, "a.vma"+comp)
		dev := vmaDevice{name: "drive-scsi0", key: "scsi0", path: src, devSize: 1 << 30, fileSize: size}
		st, err := writeVMArchive(dst, "memory: 512\n#qmdump#map:scsi0:drive-scsi0:local:raw:\n", []vmaDevice{dev}, comp)
		if err != nil {
			t.Fatal(err)
		}
		// Three clusters hold data: 0, 1 (the edge write spans 0 and 1) and the last.
		if stored := size - (st.zero - (1<<30 - size)); stored != 2*vmaCluster+1234 || st.total != 1<<30 {
			t.Fatalf("%q: stored %d of %d", comp, stored, st.total)
		}
		out := filepath.Join(dir, "restored"+comp)
		conf, err := readVMArchive(dst, func(e vmaEntry, r io.Reader) error {
			if e.name != "drive-scsi0" || e.devSize != 1<<30 || e.fileSize != size {
				t.Fatalf("entry %+v", e)
			}
			_, err := extractVMADevice(e, r, out)
			return err
		})
		if err != nil || !strings.HasPrefix(conf, "memory: 512\n") {
			t.Fatalf("%q: config %q, %v", comp, conf, err)
		}
		a, _ := os.ReadFile(src)
		b, _ := os.ReadFile(out)
		if !bytes.Equal(a, b) {
			t.Fatalf("%q: restored disk differs", comp)
		}
	}
}

// TestCluster_VzdumpVM_prune: prune-backups keeps a VM's backups of its
// own kind, removing the old archive with its log.
func TestCluster_VzdumpVM_prune(t *testing.T) {
	t.Parallel()
	k := newBackupKit(t)
	k.run(k.c.CreateVM(kitRoot, "pve", map[string]string{"vmid": "200", "scsi0": "local-lvm:1"}))
	var names []string
	for i := 0; i < 3; i++ {
		task := k.run(k.c.Vzdump(kitRoot, "pve", map[string]string{"vmid": "200", "compress": "zstd", "prune-backups": "keep-last=2"}))
		if task.ExitStatus != "OK" {
			t.Fatalf("backup %d: %q\n%s", i, task.ExitStatus, strings.Join(task.Log, "\n"))
		}
		list, _ := k.c.Content("pve", "local", "backup", 200)
		names = append(names, list[len(list)-1].VolID())
		if i == 2 {
			ctTestHasLine(t, task, "INFO: removing backup '"+names[0]+"'")
		}
	}
	list, _ := k.c.Content("pve", "local", "backup", 200)
	var got []string
	for _, e := range list {
		got = append(got, e.VolID())
	}
	if !slices.Equal(got, names[1:]) {
		t.Errorf("kept %v, want %v", got, names[1:])
	}
	first := k.c.storage.volumePath("pve", "local", strings.TrimPrefix(names[0], "local:"))
	if _, err := os.Stat(strings.TrimSuffix(first, ".vma.zst") + ".log"); !os.IsNotExist(err) {
		t.Errorf("the pruned backup's log is still there: %v", err)
	}
}
