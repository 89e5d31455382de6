// Package pvesize reads and prints PVE's disk sizes ("8G", "512M",
// "1.5T", "8GiB", bytes without a unit) as pve-common's parse_size and
// format_size do. It is the one implementation for corral's client
// (internal/propstr, so internal/plan) and its emulator (internal/sim:
// the schema's disk-size format and the model's volumes): a size the
// emulator prints is read by the client with the same rules, and a fix
// lands in both. It imports nothing of corral's, so both sides may
// depend on it without depending on each other (internal/archtest).
package pvesize

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/corralhq/corral/internal/lazyre"
)

// ErrTooLarge is a size of PVE's form past int64 bytes (8 EiB). PVE's
// schema accepts such a value (Perl keeps it as a float), so a validator
// may let it through; anything that uses the byte count must not.
var ErrTooLarge = errors.New("too large: sizes up to 8 EiB are supported")

// re is pve-common's disk-size format, with PVE 9's optional "iB" after a
// unit ("8GiB"); a bare "iB" ("8iB") is not a size.
var re = lazyre.New(`^(\d+(?:\.\d+)?)(?:([KMGT])(?:iB)?)?$`)

var shifts = map[string]uint{"": 0, "K": 10, "M": 20, "G": 30, "T": 40}

// Parse reads a disk size into bytes: K, M, G and T are powers of 1024,
// and a fraction is truncated after scaling, as Perl's int() does
// ("0.5K" is 512, "1.5T" is 1536G). An integer size is exact (Perl keeps
// integers that fit exactly too). A size of the form that does not fit
// in an int64 is an error wrapping ErrTooLarge, never a wrapped
// (negative) number; an error always names the input.
func Parse(s string) (int64, error) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("invalid size: %s", s)
	}
	shift := shifts[m[2]]
	if n, ok := new(big.Int).SetString(m[1], 10); ok {
		n.Lsh(n, shift)
		if !n.IsInt64() {
			return 0, fmt.Errorf("invalid size: %s: %w", s, ErrTooLarge)
		}
		return n.Int64(), nil
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size: %s", s)
	}
	// float64(math.MaxInt64) is 2^63, the first value int64 cannot hold.
	if f *= float64(uint64(1) << shift); f >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size: %s: %w", s, ErrTooLarge)
	}
	return int64(f), nil
}

// Format prints bytes as format_size does: the largest of T, G, M and K
// that divides the count exactly, else plain bytes ("8G", "1536M",
// "1000"). Like PVE's, 0 prints as "0T".
func Format(n int64) string {
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"T", 40}, {"G", 30}, {"M", 20}, {"K", 10}} {
		if n%(int64(1)<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}
