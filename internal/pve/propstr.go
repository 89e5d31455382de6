package pve

import "github.com/corralhq/corral/internal/propstr"

// Property strings, sizes and booleans are read and written by package
// propstr, which the planner shares; these names keep the client's API.

type (
	MountPoint = propstr.MountPoint
	NetDevice  = propstr.NetDevice
)

var (
	ParseMountPoint = propstr.ParseMountPoint
	ParseNetDevice  = propstr.ParseNetDevice
	ParseSize       = propstr.ParseSize
	FormatSize      = propstr.FormatSize
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
