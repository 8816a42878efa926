package facts

// StepEnvBuild is the record of an environment build (POST
// /v1/environments/build), written by the supervisor before the build's
// exec is accepted, under that exec's id: what was asked to be built, from
// which lock, with which packages.
const StepEnvBuild = "env_build"

// Package is one pinned package of an environment build's lock.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// EnvBuild is the facts of an environment build.
type EnvBuild struct {
	Name       string    `json:"name" audit:"always" doc:"the environment being built"`
	Language   string    `json:"language" audit:"always" doc:"python or javascript"`
	LockSHA256 string    `json:"lock_sha256" audit:"always" doc:"SHA-256 of the lock as received (requirements.txt or package-lock.json)"`
	Packages   []Package `json:"packages,omitempty" doc:"every pinned package of the lock (name, exact version), sorted"`
	Source     string    `json:"source,omitzero" doc:"where the packages come from: the index or registry URL, or find-links (the wheels staged with the request)"`
	Egress     []string  `json:"egress,omitempty" doc:"the only host:port the build's sandbox may reach (through the egress proxy); absent: no network"`
}

// Step implements Facts.
func (*EnvBuild) Step() string { return StepEnvBuild }

// Sentences implements Facts.
func (*EnvBuild) Sentences() []Sentence {
	return []Sentence{
		{Text: "Build of {language} environment {name} from a lock with SHA-256 {lock_sha256}, packages from {source}."},
		{Text: "Its packages: {packages}."},
		{Text: "Its sandbox may reach only {egress}."},
	}
}
