package apply

import (
	"context"
	"slices"
	"sync"

	"github.com/corralhq/corral/internal/pve"
)

// listingKey is the context key of oneListing's shared listing.
type listingKey struct{}

// sharedListing is the guest listing the reads of one volume check
// share (listGuests).
type sharedListing struct {
	mu   sync.Mutex
	res  []resource
	read bool
}

// oneListing marks ctx for one check that reads the guest configs and
// then the snapshots of a node (volumesInUse): both take the guests from
// the same listing, read once, instead of listing the cluster twice in a
// row (issue 30: a --delete-volumes free batch listed it twice). Both
// reads are the one check made right before its writes, and the
// listing is as fresh for the second read as for the first.
func oneListing(ctx context.Context) context.Context {
	return context.WithValue(ctx, listingKey{}, &sharedListing{})
}

// listGuests is the cluster's guest listing: the one oneListing shares
// in ctx, read on its first use, or a fresh read without it. Each caller
// gets its own copy.
func listGuests(ctx context.Context, c *pve.Client) ([]resource, error) {
	l, _ := ctx.Value(listingKey{}).(*sharedListing)
	if l == nil {
		return c.ClusterResources(ctx, "vm")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.read {
		res, err := c.ClusterResources(ctx, "vm")
		if err != nil {
			return nil, err
		}
		l.res, l.read = res, true
	}
	return slices.Clone(l.res), nil
}
