package model

import (
	"crypto/rand"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// What qemu-server adds to a new VM's config.

// vmFillDefaults is what create_vm adds: a MAC for each netN without
// one (Proxmox's BC:24:11 prefix), smbios1's uuid, vmgenid, meta, and
// the boot order when none is given.
func vmFillDefaults(conf map[string]string, now time.Time) {
	for k, v := range conf {
		if vmNetKeyRE.MatchString(k) {
			conf[k] = vmNetWithMAC(v)
		}
	}
	if conf["smbios1"] == "" {
		conf["smbios1"] = "uuid=" + vmUUID()
	}
	if conf["vmgenid"] == "" {
		conf["vmgenid"] = vmUUID()
	}
	conf["meta"] = fmt.Sprintf("creation-qemu=9.2.0,ctime=%d", now.Unix())
	if conf["boot"] == "" {
		var order []string
		for _, k := range slices.Sorted(maps.Keys(conf)) {
			if vmBusDriveRE.MatchString(k) && !strings.Contains(conf[k], "media=cdrom") {
				order = append(order, k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(conf)) {
			if vmNetKeyRE.MatchString(k) {
				order = append(order, k)
			}
		}
		conf["boot"] = "order=" + strings.Join(order, ";")
	}
}

// vmNetWithMAC gives a netN value its model's MAC when it has none:
// "virtio,bridge=vmbr0" becomes "virtio=BC:24:11:…,bridge=vmbr0".
func vmNetWithMAC(v string) string {
	p, err := ParseProp(v, "model")
	if err != nil {
		return v
	}
	model := p["model"]
	delete(p, "model")
	for k := range p {
		if qemuNICModels[k] {
			model = k
		}
	}
	if model == "" {
		return v
	}
	if p[model] == "" {
		b := make([]byte, 3)
		rand.Read(b)
		p[model] = fmt.Sprintf("BC:24:11:%02X:%02X:%02X", b[0], b[1], b[2])
	}
	return p.Print("", model)
}

// vmUUID is a random RFC 4122 version 4 UUID.
func vmUUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
