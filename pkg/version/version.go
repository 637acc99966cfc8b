// Package version says which build of jobsched this is. The version comes from the linker stamp when there is one
// (the Dockerfile sets it):
//
//	go build -ldflags "-X github.com/jobsched/jobsched/pkg/version.Version=v1.2.3"
//
// else from the module version Go records in the binary (`go install github.com/jobsched/jobsched@v1.2.3`, or a
// pseudo-version for a build in a git checkout); the commit comes from the VCS stamp or the pseudo-version.
package version

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
)

// Unstamped is the value of Version when the linker did not set it.
const Unstamped = "dev"

// Version is the release this binary was built from, set by the linker; Unstamped when not set. Use Get, which
// falls back to the build info.
var Version = Unstamped

// Info is what `jobsched version` prints.
type Info struct {
	// Version is the release (v1.2.3), a Go pseudo-version (v0.0.0-20261129124334-5c328be4a94b), or "dev".
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, when known.
	Commit string `json:"commit,omitempty"`
	// CommitTime is the commit's time (RFC 3339), when known.
	CommitTime string `json:"commitTime,omitempty"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(Version, bi)
}

// String is the one line `jobsched version` prints, e.g.
// "v1.2.3 (commit 5c328be4a94b, 2026-11-29T12:43:34Z, modified; go1.26.8 linux/amd64)".
func (i Info) String() string {
	var about []string
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		about = append(about, "commit "+c)
	}
	if i.CommitTime != "" {
		about = append(about, i.CommitTime)
	}
	if i.Modified {
		about = append(about, "modified")
	}
	build := i.GoVersion + " " + i.Platform
	if len(about) > 0 {
		build = strings.Join(about, ", ") + "; " + build
	}
	return fmt.Sprintf("%s (%s)", i.Version, build)
}

// pseudoVersion matches a Go pseudo-version's time and revision (vX.0.0-yyyymmddhhmmss-abcdefabcdef, or
// vX.Y.(Z+1)-0.yyyymmddhhmmss-abcdefabcdef, optionally +incompatible or +dirty).
var pseudoVersion = regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(\+[0-9A-Za-z.]+)?$`)

// fromBuildInfo resolves the Info from the linker stamp and the build info (nil when the binary has none).
func fromBuildInfo(stamp string, bi *debug.BuildInfo) Info {
	i := Info{Version: Unstamped, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			i.Version = v
			if m := pseudoVersion.FindStringSubmatch(v); m != nil {
				i.Commit = m[2]
				i.Modified = strings.Contains(m[3], "dirty")
			}
		}
		var goos, goarch string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Commit = s.Value
			case "vcs.time":
				i.CommitTime = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			case "GOOS":
				goos = s.Value
			case "GOARCH":
				goarch = s.Value
			}
		}
		if goos != "" && goarch != "" {
			i.Platform = goos + "/" + goarch
		}
	}
	if stamp != "" && stamp != Unstamped {
		i.Version = stamp
	}
	return i
}
