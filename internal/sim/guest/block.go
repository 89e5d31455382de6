package guest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// Emulators side by side: each claims a loopback block for its guests'
// addresses (model.SetGuestBlock), so that two emulators on one host
// whose CTs share VMIDs never answer on the same address and port. The
// claim is a listener on 127.<block>.0.0 at the guests' SSH port, held
// for the Manager's life: no CT ever gets that address, and a second
// emulator that would serve its CTs on the same port finds it taken and
// moves on. Emulators on different ports may share a block, as their
// endpoints cannot collide. The block is remembered in the state
// directory (blockFile) and tried first at the next start, so that CT
// addresses stay put while nothing else took the block meanwhile.

// blockFile holds the state directory's last block.
const blockFile = "guest-block"

// claimAddr is the claim's address for block at port.
func claimAddr(block, port int) string {
	return net.JoinHostPort(fmt.Sprintf("127.%d.0.0", block), strconv.Itoa(port))
}

// claimBlock claims a block for port: the state's last one (else
// model.DefaultGuestBlock) when it is free, otherwise a free one chosen
// at random. It returns the block and the listener that holds it.
func claimBlock(dir string, port int) (int, net.Listener, error) {
	prefer := model.DefaultGuestBlock
	if b, err := os.ReadFile(filepath.Join(dir, blockFile)); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n >= 1 && n <= model.MaxGuestBlock {
			prefer = n
		}
	}
	order := []int{prefer}
	for _, i := range rand.Perm(model.MaxGuestBlock) {
		if i+1 != prefer {
			order = append(order, i+1)
		}
	}
	var last error
	for _, b := range order {
		ln, err := net.Listen("tcp", claimAddr(b, port))
		if err != nil {
			last = err
			continue
		}
		// Best effort: without it the next start just picks again.
		_ = model.WriteFileAtomic(filepath.Join(dir, blockFile), []byte(strconv.Itoa(b)+"\n"), 0o644)
		return b, ln, nil
	}
	return 0, nil, fmt.Errorf("guest: every loopback block 127.1-%d.0.0 is taken on port %d by other emulators (last: %w); stop one, or give this one another --guest-ssh-port",
		model.MaxGuestBlock, port, last)
}

// holdClaim answers connections to the claim by closing them, until ln
// is closed.
func holdClaim(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		c.Close()
	}
}
