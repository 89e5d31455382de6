package model

import "testing"

// TestCloneOwnName: a linked clone's data lives under its own part of
// the name; every other volume name maps to itself.
func TestCloneOwnName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"base-100-disk-0/vm-101-disk-0":                     "vm-101-disk-0",
		"100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2": "101/vm-101-disk-0.qcow2",
		"100/base-100-disk-0.qcow2":                         "100/base-100-disk-0.qcow2",
		"base-100-disk-0":                                   "base-100-disk-0",
		"vm-101-disk-0":                                     "vm-101-disk-0",
		"vztmpl/debian-base-12.tar.zst":                     "vztmpl/debian-base-12.tar.zst",
		"import/base-image/x.qcow2":                         "import/base-image/x.qcow2",
	} {
		if got := cloneOwnName(name); got != want {
			t.Errorf("cloneOwnName(%q) = %q, want %q", name, got, want)
		}
	}
}
