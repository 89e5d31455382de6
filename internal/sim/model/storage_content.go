package model

import (
	"archive/tar"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/corralhq/corral/internal/lazyre"
)

// Storage content operations: allocate and delete volumes (pve-storage
// API2/Storage/Content.pm), the appliance index and its download
// (pve-manager API2/Nodes.pm aplinfo, apl_download) and download-url
// (pve-storage API2/Storage/Status.pm). The emulator has no internet:
// a download succeeds only for a catalogue entry's URL and is served
// from the catalogue.

// Lines of pve-storage whose die has no trailing newline.
const lvmThinFormatDieLine = 70 // LvmThinPlugin.pm alloc_image "unsupported format"

// applianceMTime is the timestamp of every file in a downloaded
// appliance, so that a download always yields the same bytes.
var applianceMTime = time.Date(2025, 6, 17, 0, 0, 0, 0, time.UTC)

// storageCheckEnabledLocked is storage_check_enabled: the storage exists,
// is not disabled and is available on node.
func (sl *storageLayer) storageCheckEnabledLocked(sid, node string) (*Storage, error) {
	st := sl.state()
	s := st.storage(sid)
	if s == nil {
		return nil, Failf("storage '%s' does not exist\n", sid)
	}
	if s.Disable {
		return nil, Failf("storage '%s' is disabled\n", sid)
	}
	if !s.OnNode(node) {
		return nil, Failf("storage '%s' is not available on node '%s'\n", sid, node)
	}
	return s, nil
}

var (
	lvmVolnameRE  = lazyre.New(`^(vm|base)-(\d+)-\S+$`)
	dirImageRE    = lazyre.New(`^(?:images/)?(\d+)/[^/]+$`)
	backupOwnerRE = lazyre.New(`^backup/vzdump-(?:lxc|qemu|openvz)-(\d+)-`)
	diskNumberRE  = lazyre.New(`(?:vm|base|subvol|basevol)-(\d+)-disk-(\d+)`)
)

// parseVolnameLocked is PVE::Storage::parse_volname: the storage, the
// volume name, its content type (images, iso, vztmpl, backup, …) and its
// owner VMID (0 for none), with pve-storage's errors.
func (sl *storageLayer) parseVolnameLocked(volid string) (s *Storage, name, vtype string, owner int, err error) {
	st := sl.state()
	sid, name, ok := ParseVolID(volid)
	if !ok {
		return nil, "", "", 0, Failf("unable to parse volume ID '%s'\n", volid)
	}
	if s = st.storage(sid); s == nil {
		return nil, "", "", 0, Failf("storage '%s' does not exist\n", sid)
	}
	if s.LVMLike() {
		m := lvmVolnameRE.FindStringSubmatch(name)
		if m == nil {
			return nil, "", "", 0, Failf("unable to parse lvm volume name '%s'\n", name)
		}
		owner, _ = strconv.Atoi(m[2])
		return s, name, "images", owner, nil
	}
	if m := dirImageRE.FindStringSubmatch(name); m != nil {
		owner, _ = strconv.Atoi(m[1])
		return s, name, "images", owner, nil
	}
	if m := backupOwnerRE.FindStringSubmatch(name); m != nil {
		owner, _ = strconv.Atoi(m[1])
		return s, name, "backup", owner, nil
	}
	if typ, file, ok := strings.Cut(name, "/"); ok && file != "" && !strings.Contains(file, "/") {
		switch typ {
		case "iso", "vztmpl", "backup", "snippets", "import":
			return s, name, typ, 0, nil
		}
	}
	return nil, "", "", 0, Failf("unable to parse directory volume name '%s'\n", name)
}

// freeDiskNumberLocked is get_next_vm_diskname's search: the lowest N
// such that no volume of the storage is named <prefix>-<vmid>-disk-N,
// whatever the prefix or suffix.
func (sl *storageLayer) freeDiskNumberLocked(node, sid string, vmid int) int {
	st := sl.state()
	used := map[int]bool{}
	// Only a name holding "-<vmid>-disk-" can be one of vmid's disks:
	// checking that first spares matching the pattern against every
	// volume of the storage.
	mark := "-" + strconv.Itoa(vmid) + "-disk-"
	for _, v := range st.Volumes {
		if !st.volOn(v, node) || v.Storage != sid || !strings.Contains(v.Name, mark) {
			continue
		}
		// The last match: a linked clone's name starts with its base's.
		if all := diskNumberRE.FindAllStringSubmatch(v.Name, -1); all != nil && all[len(all)-1][1] == strconv.Itoa(vmid) {
			m := all[len(all)-1]
			n, _ := strconv.Atoi(m[2])
			used[n] = true
		}
	}
	n := 0
	for used[n] {
		n++
	}
	return n
}

// allocImageLocked is vdisk_alloc/alloc_image after the storage checks:
// a new image volume of size bytes for vmid, named name or, if name is
// empty, the lowest free disk name. It returns what lvcreate or qemu-img
// prints. Unlike allocVolumeLocked it checks no content type, as
// vdisk_alloc does not.
func (sl *storageLayer) allocImageLocked(node string, s *Storage, vmid int, name, format string, size int64) (*Volume, []string, error) {
	st := sl.state()
	if format == "" {
		format = "raw"
	}
	v := &Volume{Node: st.homeNode(node, s.ID), Storage: s.ID, Owner: vmid, Size: size, Format: format, Content: "images", Ctime: sl.clock().Unix()}
	var lines []string
	switch s.Type {
	case "lvmthin", "rbd":
		if format != "raw" && s.Type == "lvmthin" {
			return nil, nil, Failf("unsupported format '%s' at /usr/share/perl5/PVE/Storage/LvmThinPlugin.pm line %d.\n", format, lvmThinFormatDieLine)
		}
		if name != "" && !strings.HasPrefix(name, fmt.Sprintf("vm-%d-", vmid)) {
			return nil, nil, Failf("illegal name '%s' - should be 'vm-%d-*'\n", name, vmid)
		}
		if name == "" {
			name = fmt.Sprintf("vm-%d-disk-%d", vmid, sl.freeDiskNumberLocked(node, s.ID, vmid))
		}
		if st.Volumes[st.volKey(node, s.ID+":"+name)] != nil && s.Type == "rbd" {
			return nil, nil, Failf("rbd create '%s' error: rbd: create error: (17) File exists\n", name)
		}
		if st.Volumes[st.volKey(node, s.ID+":"+name)] != nil {
			return nil, nil, Failf("lvcreate '%s/%s' error:   Logical Volume \"%s\" already exists in volume group \"%s\"\n", s.VGName, name, name, s.VGName)
		}
		v.Name = name
		if s.Type == "lvmthin" {
			lines = append(lines, fmt.Sprintf("  Logical volume \"%s\" created.", name))
		}
	case "dir", "nfs":
		if name == "" {
			prefix := "vm"
			if format == "subvol" {
				prefix = "subvol"
			}
			name = fmt.Sprintf("%s-%d-disk-%d.%s", prefix, vmid, sl.freeDiskNumberLocked(node, s.ID, vmid), format)
		}
		ext := ""
		if i := strings.LastIndexByte(name, '.'); i > 0 && !strings.ContainsAny(name, "/ \t") {
			ext = name[i+1:]
		}
		switch ext {
		case "raw", "qcow2", "vmdk", "subvol":
		default:
			return nil, nil, Failf("unable to parse volume filename '%s'\n", name)
		}
		if ext != format {
			return nil, nil, Failf("illegal name '%s' - wrong extension for format ('%s != '%s')\n", name, ext, format)
		}
		v.Name = fmt.Sprintf("%d/%s", vmid, name)
		path := fmt.Sprintf("%s/images/%s", s.Path, v.Name)
		if st.Volumes[st.volKey(node, v.VolID())] != nil {
			return nil, nil, Failf("disk image '%s' already exists\n", path)
		}
		if format == "subvol" && size != 0 {
			return nil, nil, Failf("storage does not support subvol quotas\n")
		}
		if format != "subvol" {
			lines = append(lines, fmt.Sprintf("Formatting '%s', fmt=%s size=%d", path, format, size))
		}
	default:
		return nil, nil, Failf("storage type '%s' cannot hold images\n", s.Type)
	}
	if err := os.MkdirAll(sl.volumePath(node, s.ID, v.Name), 0o755); err != nil {
		return nil, nil, fmt.Errorf("allocate %s: %w", v.VolID(), err)
	}
	st.Volumes[st.volKey(node, v.VolID())] = v
	sl.journal.markVolume(node, v.VolID())
	return v, lines, nil
}

var (
	allocSizeRE = lazyre.New(`^(\d+)([MG]?)$`)
	allocExtRE  = lazyre.New(`\.(raw|qcow2|vmdk)$`)
)

// AllocVolume is POST /nodes/{node}/storage/{storage}/content: allocate
// a disk image for vmid (params vmid, filename, size in KiB or with an
// M/G suffix, format). An empty filename picks the lowest free
// vm-<vmid>-disk-N. It returns the new volid. No content-type check:
// vdisk_alloc has none.
func (sl *storageLayer) AllocVolume(auth Auth, node, storage string, params map[string]string) (string, error) {
	st := sl.state()
	sl.stateMu.Lock()
	defer sl.stateMu.Unlock()
	if err := sl.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	sizeStr := params["size"]
	m := allocSizeRE.FindStringSubmatch(sizeStr)
	if m == nil {
		return "", ParamError(map[string]string{"size": fmt.Sprintf("unable to parse size '%s'", sizeStr)})
	}
	size, _ := strconv.ParseInt(m[1], 10, 64)
	switch m[2] {
	case "M":
		size *= 1024
	case "G":
		size *= 1024 * 1024
	}
	name, format := params["filename"], params["format"]
	if e := allocExtRE.FindStringSubmatch(name); e != nil {
		if format != "" && format != e[1] {
			return "", ParamError(map[string]string{"format": fmt.Sprintf("different storage formats (%s != %s)", format, e[1])})
		}
		format = e[1]
	}
	if st.storage(storage) == nil {
		return "", Failf("storage '%s' does not exist\n", storage)
	}
	vmid, err := strconv.Atoi(params["vmid"])
	if err != nil || vmid <= 0 {
		return "", Failf("no VMID specified\n")
	}
	s, err := sl.storageCheckEnabledLocked(storage, node)
	if err != nil {
		return "", err
	}
	v, _, err := sl.allocImageLocked(node, s, vmid, name, format, size*kib)
	if err != nil {
		return "", err
	}
	if err := sl.journal.saveLocked(); err != nil {
		return "", err
	}
	return v.VolID(), nil
}

// DeleteVolume is DELETE /nodes/{node}/storage/{storage}/content/{volume}:
// task imgdel, id "<owner>@<storage>" (or "<storage>" for a volume
// without owner). It needs Datastore.Allocate on the storage — for a
// backup with an owner, Datastore.AllocateSpace plus VM.Backup on the
// owner instead. Nothing checks whether a guest config still references
// the volume (behaviour.md "Storage content"); like lvremove on a real
// host, the task fails for an LV a running CT has mounted. With delay
// (seconds), it waits for the task and returns "" — PVE's null — if it
// ended well within that time.
func (sl *storageLayer) DeleteVolume(auth Auth, node, storage, volume string, params map[string]string) (string, error) {
	upid, err := sl.startDeleteVolume(auth, node, storage, volume)
	if err != nil {
		return "", err
	}
	delay, _ := strconv.Atoi(params["delay"])
	if delay <= 0 {
		return upid, nil
	}
	ctx, cancel := context.WithTimeout(sl.ctx, time.Duration(delay)*time.Second)
	defer cancel()
	t, err := sl.tasks.WaitTask(ctx, node, upid)
	if err != nil || t.Status != "stopped" {
		return upid, nil
	}
	if t.ExitStatus == "OK" || strings.HasPrefix(t.ExitStatus, "WARNINGS") {
		return "", nil
	}
	return "", Failf("%s\n", t.ExitStatus)
}

func (sl *storageLayer) startDeleteVolume(auth Auth, node, storage, volume string) (string, error) {
	st := sl.state()
	sl.stateMu.Lock()
	defer sl.stateMu.Unlock()
	if err := sl.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	volid := storage + ":" + volume
	if strings.Contains(volume, ":") {
		sid, _, ok := ParseVolID(volume)
		switch {
		case !ok:
			return "", ParamError(map[string]string{"volume": fmt.Sprintf("unable to parse volume ID '%s'\n", volume)})
		case storage != "" && sid != storage:
			return "", ParamError(map[string]string{"volume": fmt.Sprintf("storage ID mismatch (%s != %s)\n", sid, storage)})
		}
		volid, storage = volume, sid
	}
	_, _, vtype, owner, err := sl.parseVolnameLocked(volid)
	if err != nil {
		return "", err
	}
	if !auth.IsRoot() {
		if vtype == "backup" && owner != 0 {
			if err := st.Access.Check(auth, "/storage/"+storage, []string{"Datastore.AllocateSpace"}, false); err != nil {
				return "", err
			}
			if err := st.Access.Check(auth, fmt.Sprintf("/vms/%d", owner), []string{"VM.Backup"}, false); err != nil {
				return "", err
			}
		} else if err := st.Access.Check(auth, "/storage/"+storage, []string{"Datastore.Allocate"}, false); err != nil {
			return "", err
		}
	}
	id := storage
	if owner != 0 {
		id = fmt.Sprintf("%d@%s", owner, storage)
	}
	return sl.tasks.spawn(auth, node, "imgdel", id, func(w *Worker) error {
		if err := w.Phase("imgdel", 1); err != nil {
			return err
		}
		return w.Do(func(st *State) error {
			if err := sl.freeImageLocked(w, node, volid); err != nil {
				return err
			}
			w.logLocked("Removed volume '%s'", volid)
			return nil
		})
	}), nil
}

// freeImageLocked is vdisk_free for DELETE content, with what lvremove
// prints. A missing LV is no error; a missing file is only warned about.
func (sl *storageLayer) freeImageLocked(w *Worker, node, volid string) error {
	st := sl.state()
	s, name, _, _, err := sl.parseVolnameLocked(volid)
	if err != nil {
		return err
	}
	if _, err := sl.storageCheckEnabledLocked(s.ID, node); err != nil {
		return err
	}
	v := st.Volumes[st.volKey(node, volid)]
	if v == nil {
		if s.DirLike() {
			w.logLocked("disk image '%s' does not exist", sl.hostPath(s, name))
		}
		return nil
	}
	if v.Protected {
		return Failf("cannot remove protected volume '%s' on '%s'\n", name, s.ID)
	}
	if s.Type == "lvmthin" {
		lv := s.VGName + "/" + name
		if sl.volumeMountedLocked(node, volid) {
			return Failf("lvremove '%s' error:   Logical volume %s in use.\n", lv, lv)
		}
		for _, snap := range v.Snapshots {
			w.logLocked("  Logical volume \"snap_%s_%s\" successfully removed.", name, snap)
		}
		w.logLocked("  Logical volume \"%s\" successfully removed.", name)
	}
	if s.Type == "rbd" {
		w.logLocked("Removing image: 100%% complete...done.")
	}
	return sl.freeVolumeLocked(node, volid)
}

// volumeMountedLocked reports whether a running CT on node has volid as
// its rootfs or an mpN, i.e. holds the LV open.
func (sl *storageLayer) volumeMountedLocked(node, volid string) bool {
	st := sl.state()
	for _, g := range st.Guests {
		if g.Node == node && g.Running && volumeInUse(&Guest{Config: g.Config}, volid, false, false) {
			return true
		}
	}
	return false
}

// hostPath is where a dir storage keeps a volume on a real host.
func (sl *storageLayer) hostPath(s *Storage, name string) string {
	typ, rest, _ := strings.Cut(name, "/")
	switch typ {
	case "vztmpl":
		return s.Path + "/template/cache/" + rest
	case "iso":
		return s.Path + "/template/iso/" + rest
	case "backup":
		return s.Path + "/dump/" + rest
	case "import":
		return s.Path + "/import/" + rest
	case "images":
		return s.Path + "/images/" + rest
	}
	return s.Path + "/images/" + name
}

// Aplinfo is GET /nodes/{node}/aplinfo: the emulator's appliance index.
func (sl *storageLayer) Aplinfo(node string) []Appliance {
	return append([]Appliance(nil), Catalogue...)
}

// DownloadAppliance is POST /nodes/{node}/aplinfo (apl_download): task
// "download", id the template file name, which writes the appliance to
// <storage>:vztmpl/<template>. An unknown template is a 400
// {template: "no such template"}; the storage must allow vztmpl.
func (sl *storageLayer) DownloadAppliance(auth Auth, node string, params map[string]string) (string, error) {
	sl.stateMu.Lock()
	defer sl.stateMu.Unlock()
	if err := sl.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	tmpl := params["template"]
	a, ok := applianceFor(tmpl)
	if !ok {
		return "", ParamError(map[string]string{"template": "no such template"})
	}
	s, err := sl.storageCheckEnabledLocked(params["storage"], node)
	if err != nil {
		return "", err
	}
	if !s.HasContent("vztmpl") {
		return "", Failf("storage '%s' does not support templates\n", s.ID)
	}
	d := download{node: node, storage: s.ID, content: "vztmpl", file: tmpl, url: a.URL(), hashRequired: true, algorithm: "sha512"}
	return sl.tasks.spawn(auth, node, "download", tmpl, func(w *Worker) error { return sl.downloadTask(w, d) }), nil
}

var (
	vztmplExtRE = lazyre.New(`(?i)\.tar\.(gz|xz|zst|bz2)$`)
	isoExtRE    = lazyre.New(`(?i)\.(iso|img)$`)
	importExtRE = lazyre.New(`(?i)\.(ova|qcow2|raw|vmdk)$`)
	filenameRE  = lazyre.New(`[^-a-zA-Z0-9_.]`)
)

// DownloadURL is POST /nodes/{node}/storage/{storage}/download-url: task
// "download", id the (encoded) file name. params: content (vztmpl, iso,
// import), filename (normalized as PVE does), url, checksum,
// checksum-algorithm, verify-certificates, compression. The handler
// itself checks no privileges: the schema's (Datastore.AllocateTemplate
// on the storage and Sys.Audit+Sys.Modify on / or Sys.AccessNetwork on
// the node) is the HTTP layer's. Only a catalogue URL downloads; any
// other fails in the task as wget would without a network.
func (sl *storageLayer) DownloadURL(auth Auth, node, storage string, params map[string]string) (string, error) {
	sl.stateMu.Lock()
	defer sl.stateMu.Unlock()
	if err := sl.nodes.checkNodeLocked(node); err != nil {
		return "", err
	}
	s, err := sl.storageCheckEnabledLocked(storage, node)
	if err != nil {
		return "", err
	}
	if s.Type != "dir" {
		return "", Failf("can't upload to storage type '%s', not a file based storage!\n", s.Type)
	}
	content := params["content"]
	if !s.HasContent(content) {
		return "", Failf("storage '%s' is not configured for content-type '%s'\n", storage, content)
	}
	file := normalizeFilename(params["filename"])
	var extRE *lazyre.Regexp
	switch content {
	case "iso":
		extRE = isoExtRE
	case "vztmpl":
		extRE = vztmplExtRE
	case "import":
		extRE = importExtRE
	default:
		return "", ParamError(map[string]string{"content": fmt.Sprintf("upload content-type '%s' is not allowed", content)})
	}
	if !extRE.MatchString(file) {
		return "", ParamError(map[string]string{"filename": "wrong file extension"})
	}
	d := download{node: node, storage: storage, content: content, file: file, url: params["url"],
		compression: params["compression"]}
	if sum := params["checksum"]; sum != "" {
		d.checksum, d.algorithm, d.hashRequired = strings.ToLower(sum), params["checksum-algorithm"], true
	}
	return sl.tasks.spawn(auth, node, "download", encodeText(file), func(w *Worker) error { return sl.downloadTask(w, d) }), nil
}

// normalizeFilename is normalize_content_filename: the base name with
// every character outside [-a-zA-Z0-9_.] replaced by "_".
func normalizeFilename(name string) string {
	name = strings.TrimRight(name, "\n")
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	return filenameRE.ReplaceAllString(name, "_")
}

// encodeText is PVE::Tools::encode_text, which makes a task id safe.
func encodeText(s string) string {
	var b strings.Builder
	for _, r := range []byte(s) {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.IndexByte("_.!~*'()-", r) >= 0 {
			b.WriteByte(r)
		} else {
			fmt.Fprintf(&b, "\\x%02x", r)
		}
	}
	return b.String()
}

// download is one download_file_from_url call.
type download struct {
	node, storage, content, file string
	url                          string
	compression                  string
	hashRequired                 bool
	algorithm, checksum          string // checksum "" with hashRequired: the catalogue's own
}

// downloadTask is download_file_from_url against the catalogue: it logs
// as PVE and wget do, refuses to overwrite an existing file unless its
// checksum is the expected one, and registers the new volume.
func (sl *storageLayer) downloadTask(w *Worker, d download) error {
	if d.compression != "" && d.content != "iso" {
		return Failf("decompression not supported for %s\n", d.content)
	}
	name := d.content + "/" + d.file
	volid := d.storage + ":" + name
	var dest, hostDest string
	var exists bool
	err := w.Do(func(st *State) error {
		s := st.storage(d.storage)
		dest, hostDest = sl.volumePath(d.node, d.storage, name), sl.hostPath(s, name)
		exists = st.Volumes[st.volKey(d.node, volid)] != nil
		return nil
	})
	if err != nil {
		return err // interrupted: dest is unknown, nothing may be written
	}
	w.Log("downloading %s to %s", d.url, hostDest)
	a, fromCatalogue := catalogueByURL(d.url)
	if exists {
		return sl.keepExisting(w, d, dest, hostDest, a, fromCatalogue)
	}
	ts := sl.clock().Format("2006-01-02 15:04:05")
	w.Log("--%s--  %s", ts, d.url)
	if !fromCatalogue {
		return sl.failDownload(w, d.url, ts)
	}
	tmp := fmt.Sprintf("%s.tmp_dwnl.%d", dest, w.t.PID)
	hostTmp := fmt.Sprintf("%s.tmp_dwnl.%d", hostDest, w.t.PID)
	size, err := sl.appliances.writeAppliance(tmp, a, applianceMTime)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("download %s: %w", d.url, err)
	}
	w.Log("HTTP request sent, awaiting response... 200 OK")
	w.Log("Length: %d [application/octet-stream]", size)
	w.Log("Saving to: '%s'", hostTmp)
	if err := w.Phase("download", 1); err != nil {
		os.Remove(tmp)
		return err
	}
	w.Log("%s - '%s' saved [%d/%d]", sl.clock().Format("2006-01-02 15:04:05"), hostTmp, size, size)
	if d.hashRequired {
		if err := verifyDownload(w, d, tmp, a); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	err = w.Do(func(st *State) error {
		if err := os.Rename(tmp, dest); err != nil {
			return Failf("unable to rename temporary file: %s\n", err)
		}
		st.Volumes[st.volKey(d.node, volid)] = &Volume{Node: st.homeNode(d.node, d.storage), Storage: d.storage, Name: name, Size: size,
			Format: contentFormat(d.content, d.file), Content: d.content, Ctime: sl.clock().Unix()}
		sl.journal.markVolume(d.node, volid)
		return nil
	})
	if err != nil {
		os.Remove(tmp)
		return err
	}
	w.Log("download of '%s' to '%s' finished", d.url, hostDest)
	return nil
}

// keepExisting is a download onto a file that exists: refused without a
// checksum to compare, done when the file has it, failed otherwise.
func (sl *storageLayer) keepExisting(w *Worker, d download, dest, hostDest string, a Appliance, fromCatalogue bool) error {
	if !d.hashRequired {
		return Failf("refusing to override existing file '%s'\n", hostDest)
	}
	ok, got, err := sl.existingMatches(dest, a, fromCatalogue, d)
	if err != nil {
		return err
	}
	if ok {
		w.Log("calculating checksum of existing file...OK, got correct file already, no need to download")
		return nil
	}
	w.Log("calculating checksum of existing file...")
	return Failf("checksum mismatch: got '%s' != expect '%s', aborting\n", got, d.expected(a))
}

// verifyDownload checks the downloaded file tmp against the checksum d
// asks for.
func verifyDownload(w *Worker, d download, tmp string, a Appliance) error {
	got, err := fileChecksum(tmp, d.algorithm)
	if err != nil {
		return err
	}
	if want := d.expected(a); got != want {
		w.Log("calculating checksum...")
		return Failf("checksum mismatch: got '%s' != expect '%s'\n", got, want)
	}
	w.Log("calculating checksum...OK, checksum verified")
	return nil
}

// expected is the checksum the download must have: the caller's, or the
// catalogue's own for an appliance download.
func (d download) expected(a Appliance) string {
	if d.checksum != "" {
		return d.checksum
	}
	sum, _ := applianceChecksum(a, d.algorithm)
	return sum
}

// failDownload fails the task as wget does with no network: the
// Proxmox download server answers 404 for anything not in the
// catalogue, every other host does not resolve. run_command reports the
// last line wget printed.
func (sl *storageLayer) failDownload(w *Worker, rawURL, ts string) error {
	host := rawURL
	if u, err := url.Parse(rawURL); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	if host == "download.proxmox.com" {
		w.Log("HTTP request sent, awaiting response... 404 Not Found")
		last := ts + " ERROR 404: Not Found."
		w.Log("%s", last)
		return Failf("download failed: %s\n", last)
	}
	w.Log("Resolving %s (%s)... failed: Temporary failure in name resolution.", host, host)
	last := fmt.Sprintf("wget: unable to resolve host address '%s'", host)
	w.Log("%s", last)
	return Failf("download failed: %s\n", last)
}

// URLMetadata is GET /nodes/{node}/query-url-metadata (Nodes.pm
// query_url_metadata), which HEADs url from the node. The emulator uses no
// network: a catalogue address answers with the appliance's file name,
// size and type; any other address of download.proxmox.com is a 404, and
// every other host cannot be resolved, as on a node without DNS. A
// response other than 200 is PVE's 500 "invalid server response".
func (sl *storageLayer) URLMetadata(node, rawURL string) (map[string]any, error) {
	if err := sl.nodes.CheckNode(node); err != nil {
		return nil, err
	}
	a, ok := catalogueByURL(rawURL)
	if !ok {
		return nil, Failf("invalid server response: '%s'\n", headFailure(rawURL))
	}
	size, err := sl.appliances.applianceSize(a)
	if err != nil {
		return nil, err
	}
	return map[string]any{"filename": a.Template, "size": size, "mimetype": "application/octet-stream"}, nil
}

// headFailure is the status line LWP gives a HEAD of rawURL that the
// catalogue does not serve: download.proxmox.com answers 404, any other
// host fails name resolution (LWP's own 500).
func headFailure(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return "400 URL missing"
	}
	if u.Hostname() == "download.proxmox.com" {
		return "404 Not Found"
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return fmt.Sprintf("500 Can't connect to %s:%s (Temporary failure in name resolution)", u.Hostname(), port)
}

// catalogueByURL finds the appliance served at u.
func catalogueByURL(u string) (Appliance, bool) {
	for _, a := range Catalogue {
		if a.URL() == u {
			return a, true
		}
	}
	return Appliance{}, false
}

// existingMatches decides PVE's "got correct file already": with a
// caller's checksum, by hashing the file; for an appliance download, by
// comparing the archive's files with the appliance's (so that a template
// the datacenter was created with counts as the same download). got is
// the existing file's checksum.
func (sl *storageLayer) existingMatches(path string, a Appliance, fromCatalogue bool, d download) (ok bool, got string, err error) {
	got, err = fileChecksum(path, d.algorithm)
	if err != nil {
		return false, "", err
	}
	if d.checksum != "" {
		return got == d.checksum, got, nil
	}
	if !fromCatalogue {
		return false, got, nil
	}
	if sl.realTemplate != "" && a.Template == RealTemplateName {
		want, err := fileChecksum(sl.realTemplate, d.algorithm)
		return err == nil && want == got, got, err
	}
	same, err := sameTemplateFiles(path, a)
	return same, got, err
}

// sameTemplateFiles reports whether the tar.zst at path holds exactly
// the regular files writeTemplate puts in a's archive.
func sameTemplateFiles(path string, a Appliance) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		return false, nil
	}
	defer zr.Close()
	want := templateFiles(a)
	seen := 0
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return seen == len(want), nil
		}
		if err != nil {
			return false, nil
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(io.LimitReader(tr, 1<<20))
		if err != nil {
			return false, nil
		}
		if w, ok := want[strings.TrimPrefix(h.Name, "./")]; !ok || w != string(body) {
			return false, nil
		}
		seen++
	}
}

// applianceChecksum is the checksum of the bytes the emulator serves for
// appliance a (what the appliance index would list).
func applianceChecksum(a Appliance, algorithm string) (string, error) {
	dir, err := os.MkdirTemp("", "corral-appliance-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p := filepath.Join(dir, a.Template)
	if _, err := writeTemplate(p, a, applianceMTime); err != nil {
		return "", err
	}
	return fileChecksum(p, algorithm)
}

// fileChecksum hashes a file with one of download-url's algorithms.
func fileChecksum(path, algorithm string) (string, error) {
	var h hash.Hash
	switch algorithm {
	case "md5":
		h = md5.New()
	case "sha1":
		h = sha1.New()
	case "sha224":
		h = sha256.New224()
	case "sha256":
		h = sha256.New()
	case "sha384":
		h = sha512.New384()
	case "sha512", "":
		h = sha512.New()
	default:
		return "", Failf("unknown checksum algorithm '%s'\n", algorithm)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// contentFormat is the format a storage listing shows for a file.
func contentFormat(content, file string) string {
	switch content {
	case "vztmpl":
		if m := vztmplExtRE.FindStringSubmatch(file); m != nil {
			return "t" + strings.ToLower(m[1])
		}
	case "iso":
		return "iso"
	case "import":
		if m := importExtRE.FindStringSubmatch(file); m != nil {
			return strings.ToLower(m[1])
		}
	}
	return "raw"
}
