package manifest

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"

	"github.com/corralhq/corral/internal/lazyre"
)

// Size is a disk size in bytes. Manifest sizes are whole MiB, because PVE
// allocates a new volume as STORAGE:GiB and rounds to MiB
// (behaviour.md §f: "int(8*1024)*1024 KiB").
type Size int64

// Units of Size.
const (
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// maxSize bounds a size so that byte counts never overflow: 1 PiB is far
// beyond any single LXC volume.
const maxSize = 1024 * TiB

// sizePattern is the accepted syntax: a decimal number and a binary unit,
// the subset of PVE's disk-size format that has a unit (behaviour.md §f).
const sizePattern = `^[0-9]+(\.[0-9]+)?[MGT](iB)?$`

var sizeRE = lazyre.New(sizePattern)

// errSizeSyntax is returned by ParseSize for text that is not a size.
var errSizeSyntax = errors.New("not a size")

// ParseSize parses "512M", "10G", "1.5T" (or the same with "iB"). The units
// are binary (M = MiB). The result must be a positive whole number of MiB.
func ParseSize(s string) (Size, error) {
	if !sizeRE.MatchString(s) {
		return 0, errSizeSyntax
	}
	num, unit := s[:len(s)-1], s[len(s)-1]
	if len(s) > 3 && s[len(s)-2:] == "iB" {
		num, unit = s[:len(s)-3], s[len(s)-3]
	}
	mult := map[byte]int64{'M': 1, 'G': 1 << 10, 'T': 1 << 20}[unit]
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, errSizeSyntax
	}
	mib := r.Mul(r, big.NewRat(mult, 1))
	switch {
	case mib.Sign() == 0:
		return 0, errors.New("must be more than 0")
	case !mib.IsInt():
		return 0, errors.New("must be a whole number of MiB")
	case mib.Cmp(big.NewRat(int64(maxSize/MiB), 1)) > 0:
		return 0, fmt.Errorf("must be at most %s", maxSize)
	}
	return Size(mib.Num().Int64()) * MiB, nil
}

// Bytes is the size in bytes.
func (s Size) Bytes() int64 { return int64(s) }

// MiB is the size in whole MiB (rounded down).
func (s Size) MiB() int64 { return int64(s / MiB) }

// GiB is the size in GiB, the unit of PVE's STORAGE:GiB allocation syntax
// ("local-lvm:0.5" is allowed).
func (s Size) GiB() float64 { return float64(s) / float64(GiB) }

// String prints the size in the largest unit that holds it exactly, the
// way PVE's format_size prints volume sizes: "8G", "512M", "1T". Sizes
// that are not whole MiB print in bytes.
func (s Size) String() string {
	switch {
	case s != 0 && s%TiB == 0:
		return strconv.FormatInt(int64(s/TiB), 10) + "T"
	case s != 0 && s%GiB == 0:
		return strconv.FormatInt(int64(s/GiB), 10) + "G"
	case s != 0 && s%MiB == 0:
		return strconv.FormatInt(int64(s/MiB), 10) + "M"
	}
	return strconv.FormatInt(int64(s), 10)
}

// MarshalText prints the size as String does, so JSON output reads "10G".
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
