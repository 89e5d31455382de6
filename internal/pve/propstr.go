package pve

import (
	"github.com/corralhq/corral/internal/propstr"
	"github.com/corralhq/corral/internal/pvesize"
)

// Property strings and booleans are read and written by package propstr,
// which the planner shares, and sizes by package pvesize, which the
// emulator shares too; these names keep the client's API.

type (
	MountPoint = propstr.MountPoint
	NetDevice  = propstr.NetDevice
)

var (
	ParseMountPoint = propstr.ParseMountPoint
	ParseNetDevice  = propstr.ParseNetDevice
	ParseSize       = pvesize.Parse
	FormatSize      = pvesize.Format
)

func splitPropertyString(s, defaultKey string) ([][2]string, error) {
	return propstr.Split(s, defaultKey)
}

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
