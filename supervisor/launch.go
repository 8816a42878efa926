package supervisor

import "github.com/sandboxd/sandboxd/launch"

// The launch types live in package launch, which runs the helper; these
// aliases keep the supervisor's API code (and its tests) reading as before.
type (
	Caller            = launch.Caller
	StagedFile        = launch.StagedFile
	LaunchRequest     = launch.Request
	Usage             = launch.Usage
	Artifact          = launch.Artifact
	PolicyAttestation = launch.PolicyAttestation
	ExecResult        = launch.ExecResult
	Launcher          = launch.Launcher
	HealthChecks      = launch.HealthChecks
	Prober            = launch.Prober
)
