//go:build !race

package memcap

// Race is set under -race (see race.go).
const Race = false
