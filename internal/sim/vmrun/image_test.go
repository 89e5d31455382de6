package vmrun

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// needTools stops the test unless the machine can build and run VMs,
// and the run asked for them: building the image takes about 80 s and a
// boot without usable KVM minutes, too long for a newcomer's go test
// (README: under 5 minutes). CORRAL_TEST_FULL=1 or CORRAL_REQUIRE_KVM=1
// (both set by .ci/run) runs them.
func needTools(t *testing.T) {
	t.Helper()
	if !testenv.Full() && !testenv.KVM.Required() {
		t.Skip("builds and boots a real VM (minutes without KVM); CORRAL_TEST_FULL=1 or CORRAL_REQUIRE_KVM=1 runs it")
	}
	testenv.NeedRoot(t, "building the VM image (mmdebstrap) and running QEMU")
	for _, tool := range []string{"mmdebstrap", "qemu-img", "qemu-system-x86_64", "sfdisk", "genisoimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Lackf(t, testenv.KVM, "%s not found (apt-get install mmdebstrap qemu-system-x86 qemu-utils fdisk genisoimage)", tool)
		}
	}
}

// TestEnsureImage builds (or finds cached) the VM image: a qcow2 disk
// whose one partition is the labelled ext4 root, and the kernel and
// initrd that boot it.
func TestEnsureImage(t *testing.T) {
	needTools(t)
	var log strings.Builder
	img, err := EnsureImage(context.Background(), &log)
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, p := range []string{img.Disk, img.Kernel, img.Initrd} {
		if fi, err := os.Stat(p); err != nil || fi.Size() < 1<<20 {
			t.Fatalf("%s: %v (size %v)", p, err, fi)
		}
	}
	out, err := exec.Command("qemu-img", "info", img.Disk).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "file format: qcow2") || !strings.Contains(string(out), "virtual size: 2 GiB") {
		t.Fatalf("qemu-img info: %v\n%s", err, out)
	}
	again, err := EnsureImage(context.Background(), &log)
	if err != nil || again != img {
		t.Fatalf("second EnsureImage = %+v, %v; want the cached %+v", again, err, img)
	}
}
