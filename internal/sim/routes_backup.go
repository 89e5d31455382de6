package sim

import (
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/schema"
)

// backupAPI serves the backup, extract-config and snapshot routes.
type backupAPI struct {
	cluster *model.Cluster
	api     *schema.API // types a snapshot's config as GET config does
}

func (a *backupAPI) register(route routeFunc) {
	route("POST", "/nodes/{node}/vzdump", a.postVzdump)
	route("GET", "/nodes/{node}/vzdump/extractconfig", a.getVzdumpExtractConfig)

	route("GET", "/nodes/{node}/lxc/{vmid}/snapshot", a.getSnapshots)
	route("POST", "/nodes/{node}/lxc/{vmid}/snapshot", ctTask(a.cluster.SnapshotCT))
	route("GET", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}", a.getSnapshotIndex)
	route("DELETE", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}", a.deleteSnapshot)
	route("POST", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback", a.postSnapshotRollback)
	route("GET", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config", a.getSnapshotConfig)
	route("PUT", "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config", a.putSnapshotConfig)
}
