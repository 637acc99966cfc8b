// Package version holds the build's version, stamped by the linker:
//
//	go build -ldflags "-X github.com/jobsched/jobsched/pkg/version.Version=v1.2.3"
package version

// Version is the release this binary was built from; "dev" when not stamped.
var Version = "dev"
