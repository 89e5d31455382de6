# bpg's proxmox_virtual_environment_vm (v0.80.0) makes a basic VM in the
# emulator as its users write one: a SCSI disk on local-lvm imported
# from an image, a cloud-init
# drive with a user, a key and a static address, two virtio NICs on vmbr0
# (one on a VLAN), ballooning, a serial console, the guest agent on,
# OVMF with an EFI vars disk and a TPM state disk. The
# test runs apply, an empty plan, apply with more memory and another
# address, an empty plan, destroy. The
# endpoint and the API token come from PROXMOX_VE_* in the environment.
terraform {
  required_providers {
    proxmox = { source = "bpg/proxmox" }
  }
}

provider "proxmox" {}

variable "memory" {
  type = number
}

variable "address" {
  type = string
}

variable "ssh_key" {
  type = string
}

resource "proxmox_virtual_environment_vm" "vm" {
  node_name = "pve"
  vm_id     = 300
  name      = "tf-vm"
  tags      = ["corral", "test"]

  # The emulator's VMs are state only here: nothing in them answers the
  # agent, and the provider would wait its timeout (15 min by default)
  # for addresses after every start and refresh. A short timeout keeps
  # the agent on in the config and the wait short.
  agent {
    enabled = true
    timeout = "2s"
  }
  stop_on_destroy = true

  machine = "q35"
  # UEFI with an EFI vars disk and a TPM state disk, as bpg's users
  # write a Secure Boot VM.
  bios = "ovmf"
  efi_disk {
    datastore_id      = "local-lvm"
    type              = "4m"
    pre_enrolled_keys = true
  }
  tpm_state {
    datastore_id = "local-lvm"
    version      = "v2.0"
  }
  cpu {
    cores = 2
    type  = "x86-64-v2-AES"
  }
  serial_device {}
  vga {
    type = "serial0"
  }
  memory {
    dedicated = var.memory
    floating  = 512
  }
  disk {
    datastore_id = "local-lvm"
    interface    = "scsi0"
    # An image the test offers as an import volume; bpg grows the
    # imported disk to size with PUT .../resize after the create.
    import_from = "local:import/bpg-test.qcow2"
    size        = 4
    discard     = "on"
    iothread    = true
    ssd         = true
  }
  network_device {
    bridge = "vmbr0"
  }
  network_device {
    bridge   = "vmbr0"
    vlan_id  = 20
    firewall = true
    mtu      = 1400
  }
  initialization {
    datastore_id = "local-lvm"
    ip_config {
      ipv4 {
        address = var.address
        gateway = "192.0.2.1"
      }
    }
    user_account {
      username = "ops"
      keys     = [var.ssh_key]
    }
  }
  operating_system {
    type = "l26"
  }
}
