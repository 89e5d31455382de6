// Package vmrun is the emulator's QEMU runtime: the Debian 12 VM image
// built once from Debian's packages and cached, and each started VM as a
// real qemu-system-x86_64 process (KVM where /dev/kvm works, TCG with a
// warning otherwise) with its QMP socket, its guest agent's virtio-serial
// socket and its cloud-init NoCloud seed. It knows nothing of the
// emulator's state: internal/sim wires it to the model, as it does
// sim/guest for CTs (the model imports no other part of the emulator).
package vmrun
