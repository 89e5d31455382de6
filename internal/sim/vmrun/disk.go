package vmrun

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
)

// Overlay creates dst as a copy-on-write qcow2 over base (import-from
// of the cached image: the image is never written), at least size bytes
// large (0: the base's size).
func Overlay(ctx context.Context, base, dst string, size int64) error {
	args := []string{"create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", base, dst}
	if size > 0 {
		args = append(args, strconv.FormatInt(size, 10))
	}
	if out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("import-from: qemu-img create: %w: %s (install Debian's qemu-utils)", err, out)
	}
	return nil
}

// Blank creates dst as an empty qcow2 disk of size bytes (a new
// `<storage>:<size>` disk).
func Blank(ctx context.Context, dst string, size int64) error {
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", "qcow2", dst, strconv.FormatInt(size, 10)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("allocate disk: qemu-img create: %w: %s (install Debian's qemu-utils)", err, out)
	}
	return nil
}
