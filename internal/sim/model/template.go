package model

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Appliance is one entry of the emulator's local appliance catalogue
// (what /nodes/{node}/aplinfo lists; no internet is ever used).
type Appliance struct {
	Template     string // file name, e.g. debian-12-standard_12.12-1_amd64.tar.zst
	OS           string // debian, ubuntu, alpine
	Version      string
	Section      string
	Package      string
	Headline     string
	Description  string
	Systemd      int // systemd major version in the image, 0 if none
	PrettyName   string
	VersionID    string
	CodeName     string
	Architecture string
	// InstalledMiB is about what the template unpacks to: a root file
	// system smaller than that fails the create when tar runs out of
	// space, as on PVE (which checks no size beforehand).
	InstalledMiB int64
}

// URL is where the real appliance index would download it from; the
// emulator's download-url only accepts these addresses and serves them
// from its catalogue.
func (a Appliance) URL() string {
	return "http://download.proxmox.com/images/system/" + a.Template
}

// Catalogue is the emulator's appliance index.
var Catalogue = []Appliance{
	{Template: "debian-12-standard_12.12-1_amd64.tar.zst", OS: "debian-12", Version: "12.12-1", Section: "system", Package: "debian-12-standard",
		Headline: "Debian 12 (standard)", Description: "A small Debian Bookworm system including all standard packages.", Systemd: 252,
		PrettyName: "Debian GNU/Linux 12 (bookworm)", VersionID: "12", CodeName: "bookworm", Architecture: "amd64", InstalledMiB: 480},
	{Template: "debian-13-standard_13.1-2_amd64.tar.zst", OS: "debian-13", Version: "13.1-2", Section: "system", Package: "debian-13-standard",
		Headline: "Debian 13 (standard)", Description: "A small Debian Trixie system including all standard packages.", Systemd: 257,
		PrettyName: "Debian GNU/Linux 13 (trixie)", VersionID: "13", CodeName: "trixie", Architecture: "amd64", InstalledMiB: 520},
	{Template: "ubuntu-24.04-standard_24.04-2_amd64.tar.zst", OS: "ubuntu-24.04", Version: "24.04-2", Section: "system", Package: "ubuntu-24.04-standard",
		Headline: "Ubuntu 24.04 (standard)", Description: "A small Ubuntu 24.04 Noble system including all standard packages.", Systemd: 255,
		PrettyName: "Ubuntu 24.04 LTS", VersionID: "24.04", CodeName: "noble", Architecture: "amd64", InstalledMiB: 600},
	{Template: "alpine-3.22-default_20250617_amd64.tar.xz", OS: "alpine-3.22", Version: "3.22-default", Section: "system", Package: "alpine-3.22-default",
		Headline: "Alpine Linux 3.22", Description: "A small Alpine Linux system.", Systemd: 0,
		PrettyName: "Alpine Linux v3.22", VersionID: "3.22", CodeName: "", Architecture: "amd64", InstalledMiB: 12},
}

// applianceFor finds a catalogue entry by template file name.
func applianceFor(file string) (Appliance, bool) {
	for _, a := range Catalogue {
		if a.Template == file {
			return a, true
		}
	}
	return Appliance{}, false
}

// templateFiles is the small root filesystem the emulator puts in a
// template: enough for os detection, users and a shell-looking tree.
func templateFiles(a Appliance) map[string]string {
	osID := strings.SplitN(a.OS, "-", 2)[0]
	files := map[string]string{
		"etc/os-release": fmt.Sprintf("PRETTY_NAME=%q\nNAME=%q\nVERSION_ID=%q\nID=%s\n", a.PrettyName, strings.SplitN(a.PrettyName, " ", 2)[0], a.VersionID, osID),
		"etc/hostname":   "localhost\n",
		"etc/hosts":      "127.0.0.1\tlocalhost\n",
		"etc/passwd":     "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":      "root:x:0:\nnogroup:x:65534:\n",
		"root/.profile":  "# ~/.profile: executed by Bourne-compatible login shells.\n",
		"etc/motd":       a.Headline + " (corral sim template)\n",
	}
	if a.CodeName != "" {
		files["etc/os-release"] += "VERSION_CODENAME=" + a.CodeName + "\n"
	}
	if osID == "debian" {
		files["etc/debian_version"] = strings.SplitN(a.Version, "-", 2)[0] + "\n"
	}
	if a.Systemd > 0 {
		files["usr/lib/systemd/systemd.version"] = fmt.Sprintf("%d\n", a.Systemd)
	}
	if osID != "alpine" {
		// The standard templates have openssh-server (its host keys are
		// made at create); Alpine's default one has no sshd.
		files["etc/ssh/sshd_config"] = "Include /etc/ssh/sshd_config.d/*.conf\nKbdInteractiveAuthentication no\nUsePAM yes\nX11Forwarding yes\nPrintMotd no\nAcceptEnv LANG LC_*\nSubsystem\tsftp\t/usr/lib/openssh/sftp-server\n"
	}
	return files
}

// writeTemplate makes a real tar.zst (or plain tar named .tar.xz for the
// alpine entry, which is never extracted by tests) holding templateFiles.
func writeTemplate(dst string, a Appliance, mtime time.Time) (int64, error) {
	data, err := templateArchive(a, mtime)
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, err
	}
	if err := writeFileAtomic(dst, data, 0o644); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// templateArchive is the bytes of appliance a's template file, made once
// per process: every emulator writes its catalogue's stand-in templates
// into its storage when it starts, and a test process starts hundreds;
// making each (a zstd encoder's tables allocated and cleared) took 3-4%
// of internal/apply's and internal/cli's CPU under -race. The bytes are
// shared: callers only write or measure them.
func templateArchive(a Appliance, mtime time.Time) ([]byte, error) {
	key := archiveKey{a, mtime.UnixNano()}
	if data, ok := archives.Load(key); ok {
		return data.([]byte), nil
	}
	data, err := makeTemplateArchive(a, mtime)
	if err != nil {
		return nil, err
	}
	archives.Store(key, data)
	return data, nil
}

// archives are templateArchive's answers, by archiveKey.
var archives sync.Map

type archiveKey struct {
	a     Appliance
	mtime int64
}

// makeTemplateArchive builds templateArchive's bytes: a tar of
// templateFiles, zstd-compressed.
func makeTemplateArchive(a Appliance, mtime time.Time) ([]byte, error) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	dirs := map[string]bool{}
	files := templateFiles(a)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		for d := path.Dir(name); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range append(slices.Sorted(maps.Keys(dirs)), "home", "tmp", "root", "srv") {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "./" + d + "/", Mode: 0o755, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		body := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "./" + name, Mode: 0o644, Size: int64(len(body)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(tarBuf.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// openZstd opens the zstd-compressed file at path for reading; done
// closes the decoder and the file.
func openZstd(path string) (r io.Reader, done func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	zr, stop, err := newZstdReader(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return zr, func() { stop(); f.Close() }, nil
}

// extractTemplate unpacks a tar.zst template into dir (a new rootfs).
// An unprivileged CT's (ids) gets shifted owners, as tar run in its user
// namespace writes them: its rootfs's top directory is container root's
// first (as PVE chowns the mounted rootfs before running tar there), and
// the tiny tree's entries are owned as their directory, so container
// root's. Of the tiny tree only regular files and directories are
// created, every path inside dir and never through a link (dir may be an
// existing volume a CT filled).
func extractTemplate(archive, dir string, ids idMap) (systemd int, err error) {
	if ids.shifted() {
		if err := os.Lchown(dir, ids.base, ids.base); err != nil {
			return 0, err
		}
	}
	if isRealArchive(archive) {
		// tar xpf --numeric-owner as PVE runs it: owners, modes,
		// links, special files.
		if _, _, err := extractBackup(archive, []restoreMount{{path: "/", dir: dir, ids: ids}}); err != nil {
			return 0, err
		}
		return systemdVersion(dir), nil
	}
	zr, closeZstd, err := openZstd(archive)
	if err != nil {
		return 0, err
	}
	defer closeZstd()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return systemd, nil
		}
		if err != nil {
			return 0, err
		}
		name := path.Clean("/" + h.Name)
		rel := strings.TrimPrefix(name, "/")
		if rel == "" {
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if _, err := ctDirs(dir, path.Join(rel, "x"), true, 0o755); err != nil {
				return 0, err
			}
		case tar.TypeReg:
			data, err := io.ReadAll(io.LimitReader(tr, 64<<20))
			if err != nil {
				return 0, err
			}
			if err := writeCTFile(dir, rel, string(data), os.FileMode(h.Mode)&0o777, 0o755); err != nil {
				return 0, err
			}
			if name == "/usr/lib/systemd/systemd.version" {
				fmt.Sscanf(string(data), "%d", &systemd)
			}
		}
	}
}
