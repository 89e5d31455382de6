package vmrun

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The VM image: a Debian 12 root file system built once from Debian's
// packages by mmdebstrap (as the CT template is), put on an ext4
// partition of a raw disk without any loop mount (mkfs.ext4 -d at the
// partition's offset) and converted to qcow2. It has no boot loader:
// the emulator boots it with QEMU's direct kernel boot, the kernel and
// initrd kept beside the disk (a deviation from PVE, whose VMs boot
// their own firmware and loader; docs/emulator.md, "Virtual machines").

// imagePackages are what a cloud VM needs: Debian's cloud kernel (its
// virtio drivers built in), systemd, ssh, cloud-init with its NoCloud
// source, the guest agent, ifupdown with a DHCP client (the network
// renderer cloud-init picks first on Debian), dbus (without it there is
// no systemd-logind, and nothing acts on the ACPI power button that a
// shutdown presses) and growpart (cloud-init grows the root partition
// to a resized disk).
var imagePackages = []string{
	"linux-image-cloud-amd64", "systemd-sysv", "dbus", "openssh-server", "cloud-init", "cloud-guest-utils",
	"qemu-guest-agent", "ifupdown", "isc-dhcp-client", "sudo", "netbase", "iproute2",
}

// RootLabel is the root file system's label: the kernel command line
// names the root by it, so virtio0 (vda) and scsi0 (sda) both boot.
const RootLabel = "corral-root"

// imageHooks run in the built tree ($1): no host keys (cloud-init
// makes them at first boot), no machine id, the root mounted by label,
// cloud-init looking only for NoCloud, no package lists.
var imageHooks = []string{
	`rm -f "$1"/etc/ssh/ssh_host_*`,
	`echo localhost > "$1/etc/hostname"`,
	`printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$1/etc/hosts"`,
	`: > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"`,
	`echo 'LABEL=` + RootLabel + ` / ext4 defaults,errors=remount-ro 0 1' > "$1/etc/fstab"`,
	`printf 'datasource_list: [ NoCloud, None ]\nlocale: C.UTF-8\n' > "$1/etc/cloud/cloud.cfg.d/90-corral-nocloud.cfg"`,
	`rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/usr/share/doc/* "$1"/usr/share/man/*`,
}

// imageSize is the raw disk's size: the tree is about 600 MB.
const imageSize = 2 << 30

// partOffset is where the root partition starts (1 MiB, as sfdisk aligns).
const partOffset = 1 << 20

// Image is the cached VM image: a qcow2 disk with one ext4 partition and
// the kernel and initrd that boot it.
type Image struct {
	Disk, Kernel, Initrd string
}

// imageKey is the content key of the image: the packages, the hooks and
// the layout it is built from, so a change to any rebuilds it.
func imageKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "bookworm\n%s\n%s\n%d %d %s\n", strings.Join(imagePackages, ","),
		strings.Join(imageHooks, "\n"), imageSize, partOffset, RootLabel)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// ImageDir is where the image is cached:
// $XDG_CACHE_HOME/corral/images/debian-12-vm-<key>.
func ImageDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("vm image: no cache directory: %w (set XDG_CACHE_HOME)", err)
	}
	return filepath.Join(dir, "corral", "images", "debian-12-vm-"+imageKey()), nil
}

func imageIn(dir string) Image {
	return Image{Disk: filepath.Join(dir, "disk.qcow2"), Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
}

// CachedImage returns the image when it is built, without building it.
func CachedImage() (Image, bool) {
	dir, err := ImageDir()
	if err != nil {
		return Image{}, false
	}
	if _, err := os.Stat(dir); err != nil {
		return Image{}, false
	}
	return imageIn(dir), true
}

// EnsureImage returns the cached image, building it first when missing
// (a few minutes and about 150 MB of packages from the host's Debian
// mirror), with the builders' lines written to progress. Concurrent
// callers wait for one build through a lock file.
func EnsureImage(ctx context.Context, progress io.Writer) (Image, error) {
	dir, err := ImageDir()
	if err != nil {
		return Image{}, err
	}
	if _, err := os.Stat(dir); err == nil {
		return imageIn(dir), nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return Image{}, fmt.Errorf("vm image: %w", err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Image{}, fmt.Errorf("vm image: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Image{}, fmt.Errorf("vm image: lock: %w", err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(dir); err == nil {
		return imageIn(dir), nil // another process built it meanwhile
	}
	for _, tool := range []string{"mmdebstrap", "qemu-img", "sfdisk", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			return Image{}, fmt.Errorf("vm image: %s not found: install Debian's mmdebstrap, qemu-utils, fdisk and e2fsprogs (apt-get install mmdebstrap qemu-utils fdisk e2fsprogs), as root", tool)
		}
	}
	tmp := dir + ".tmp-" + strconv.Itoa(os.Getpid())
	defer os.RemoveAll(tmp)
	if err := buildImage(ctx, tmp, progress); err != nil {
		return Image{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return Image{}, fmt.Errorf("vm image: %w", err)
	}
	return imageIn(dir), nil
}

// buildImage builds the image's three files in out.
func buildImage(ctx context.Context, out string, progress io.Writer) error {
	root := filepath.Join(out, "root")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("vm image: %w", err)
	}
	fmt.Fprintf(progress, "building the Debian 12 VM image (a few minutes, once: cached in %s)...\n", filepath.Dir(out))
	args := []string{"--variant=apt", "--include=" + strings.Join(imagePackages, ",")}
	for _, h := range imageHooks {
		args = append(args, "--customize-hook="+h)
	}
	if err := run(ctx, progress, "mmdebstrap", append(args, "bookworm", root)...); err != nil {
		return err
	}
	img := imageIn(out)
	if err := copyBoot(root, img); err != nil {
		return err
	}
	raw := filepath.Join(out, "disk.raw")
	if err := os.WriteFile(raw, nil, 0o644); err != nil {
		return fmt.Errorf("vm image: %w", err)
	}
	if err := os.Truncate(raw, imageSize); err != nil {
		return fmt.Errorf("vm image: %w", err)
	}
	sf := exec.CommandContext(ctx, "sfdisk", "--quiet", raw)
	sf.Stdin = strings.NewReader("label: dos\nstart=2048, type=83\n")
	if b, err := sf.CombinedOutput(); err != nil {
		return fmt.Errorf("vm image: sfdisk: %w: %s", err, b)
	}
	blocks := strconv.Itoa((imageSize - partOffset) / 4096)
	if err := run(ctx, progress, "mkfs.ext4", "-q", "-F", "-L", RootLabel, "-b", "4096",
		"-E", "offset="+strconv.Itoa(partOffset), "-d", root, raw, blocks); err != nil {
		return err
	}
	if err := run(ctx, progress, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, img.Disk); err != nil {
		return err
	}
	os.Remove(raw)
	return os.RemoveAll(root)
}

// copyBoot copies the tree's kernel and initrd (Debian links them as
// /vmlinuz and /initrd.img) beside the disk.
func copyBoot(root string, img Image) error {
	for src, dst := range map[string]string{"vmlinuz": img.Kernel, "initrd.img": img.Initrd} {
		p, err := filepath.EvalSymlinks(filepath.Join(root, src))
		if err != nil {
			// the link is absolute (boot/…): resolve it inside the tree
			l, lerr := os.Readlink(filepath.Join(root, src))
			if lerr != nil {
				return fmt.Errorf("vm image: no %s in the tree: %w", src, err)
			}
			p = filepath.Join(root, l)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("vm image: %w", err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return fmt.Errorf("vm image: %w", err)
		}
	}
	return nil
}

// run runs a builder, its lines prefixed with its name on progress; a
// failure quotes its last 20 lines.
func run(ctx context.Context, progress io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var tail []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			fmt.Fprintf(progress, "  %s: %s\n", name, sc.Text())
			tail = append(tail, sc.Text())
			if len(tail) > 20 {
				tail = tail[1:]
			}
		}
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		return fmt.Errorf("vm image: %s: %w: %s (it needs root and the host's Debian mirror)", name, err, strings.Join(tail, "\n"))
	}
	return nil
}
