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

// planListingKey is the context key of KeepListing's listing.
type planListingKey struct{}

// KeepListing marks ctx so that the next ObserveWith under it keeps the
// guest listing its observation was made from, for the one check of
// Destroy that runs before anything of the plan changes: the snapshot
// guard (guardDestroySnapshots). A destroy under the lock plans and then
// guards with nothing written between, so listing the cluster again
// there could only show what the plan's listing showed (issue 30: the
// guard's listing was one of the five of a one-app destroy). The checks
// made right before a write (the identity check, the free's check) still
// read afresh: they never take this listing.
func KeepListing(ctx context.Context) context.Context {
	return context.WithValue(ctx, planListingKey{}, &sharedListing{})
}

// keepListing records res, an observation's settled listing, in ctx's
// KeepListing mark, if any (a later observation replaces it).
func keepListing(ctx context.Context, res []resource) {
	l, _ := ctx.Value(planListingKey{}).(*sharedListing)
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.res, l.read = slices.Clone(res), true
}

// plannedListing is ctx with the listing kept by KeepListing as the one
// listGuests answers from, taken once: a second caller lists afresh.
// Without a kept listing it is ctx.
func plannedListing(ctx context.Context) context.Context {
	l, _ := ctx.Value(planListingKey{}).(*sharedListing)
	if l == nil {
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.read {
		return ctx
	}
	kept := &sharedListing{res: l.res, read: true}
	l.res, l.read = nil, false
	return context.WithValue(ctx, listingKey{}, kept)
}
