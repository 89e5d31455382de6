package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/sim/prereq"
	"github.com/corralhq/corral/internal/ui"
)

type doctorArgs struct {
	ff         fileFlags
	cf         connFlags
	printSetup bool
	setup      doctor.SetupOptions
}

func newDoctorCmd(st *streams) *cobra.Command {
	a := &doctorArgs{}
	cmd := &cobra.Command{
		Use:         "doctor",
		Annotations: jsonForm(),
		Short:       "Check that this token can apply the manifest, or print a least-privilege token setup",
		Long: `doctor checks, for the manifest at hand, everything apply needs from the
cluster: that the API is reachable and its certificate trusted (printing
the fingerprint to pin when it is not), the Proxmox VE version, the
token's effective privileges on every path the manifest touches
(/vms/<vmid>, /storage/<sid>, /nodes/<node>, /sdn/zones/localnetwork/<bridge>),
the storages, the templates on each node, free VMIDs and free space.

Each missing privilege is named with its path, the operation that needs it
and why, and the pveum command that grants it. A privilege-separated token
holds only what both its own ACL and its user hold; doctor explains when
that intersection is what is missing. What only root@pam can set (feature
flags other than nesting such as keyctl for Docker, bind and device
mounts, hookscripts) comes with the exact one-time host command.

With no endpoint configured, the embedded emulator is the cluster and
its containers run on this machine: doctor then also checks this
machine's prerequisites, as corral sim doctor does, and fails when the
emulator would refuse to start containers here.

--print-setup prints a pveum script instead: a role with exactly the
privileges this manifest needs, a user, a privilege-separated token, and
ACLs for both on the narrowest paths. It does not contact the cluster.

EXIT STATUS
  0   the manifest can be applied with this token (--print-setup: printed)
  1   it cannot, or an error`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDoctor(cmd, st, a) },
	}
	a.ff.add(cmd.Flags())
	a.cf.add(cmd.Flags())
	f := cmd.Flags()
	f.BoolVar(&a.printSetup, "print-setup", false, "print a pveum script for a least-privilege token for this manifest")
	f.StringVar(&a.setup.Role, "role", doctor.DefaultRole, "--print-setup: role to create")
	f.StringVar(&a.setup.User, "user", doctor.DefaultUser, "--print-setup: user to create (user@realm)")
	f.StringVar(&a.setup.Token, "token-name", doctor.DefaultToken, "--print-setup: name of the token to create")
	return cmd
}

func runDoctor(cmd *cobra.Command, st *streams, a *doctorArgs) error {
	asJSON, err := a.ff.json()
	if err != nil {
		return err
	}
	f, err := a.ff.load(true)
	if err != nil {
		return err
	}
	if a.printSetup {
		s := doctor.Setup(doctor.Requirements(f, doctor.Targets{}), a.setup)
		return writeRedacted(st.out, f, func(w io.Writer) error { return ui.WriteDoctorSetup(w, s, asJSON) })
	}
	s, err := connect(cmd.Context(), st, a.cf)
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := doctor.Check(cmd.Context(), s.client, f, doctor.Options{Endpoint: s.endpoint, Role: a.setup.Role})
	if err != nil {
		return redactErr(f, err)
	}
	var machine *prereq.Report
	if s.embedded != nil && !asJSON {
		// The embedded emulator's CTs run on this machine: its
		// prerequisites are the cluster's (corral sim doctor).
		m := prereq.Run()
		machine = &m
	}
	if err := writeRedacted(st.out, f, func(w io.Writer) error { return ui.WriteDoctorReport(w, r, machine, asJSON) }); err != nil {
		return err
	}
	if !r.Applyable || s.embedded != nil && s.embedded.Guests().Refused() != nil {
		return &exitError{code: ExitError}
	}
	return nil
}
