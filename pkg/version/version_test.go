package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuildInfo(t *testing.T) {
	here := runtime.GOOS + "/" + runtime.GOARCH
	vcs := []debug.BuildSetting{
		{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "5c328be4a94b9491676187f7eab3cf8adcb77722"},
		{Key: "vcs.time", Value: "2026-11-29T12:43:34Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name  string
		stamp string
		bi    *debug.BuildInfo
		want  Info
	}{
		{
			name: "no build info, not stamped",
			want: Info{Version: "dev", GoVersion: runtime.Version(), Platform: here},
		},
		{
			name:  "no build info, stamped by the Dockerfile",
			stamp: "v0.1.0",
			want:  Info{Version: "v0.1.0", GoVersion: runtime.Version(), Platform: here},
		},
		{
			name: "go install module@v1.2.3: the module version, no VCS stamp",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/jobsched/jobsched", Version: "v1.2.3"}},
			want: Info{Version: "v1.2.3", GoVersion: "go1.26.8", Platform: here},
		},
		{
			name: "go install module@commit: the pseudo-version carries the commit",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261129124334-5c328be4a94b"}},
			want: Info{Version: "v0.0.0-20261129124334-5c328be4a94b", Commit: "5c328be4a94b", GoVersion: "go1.26.8", Platform: here},
		},
		{
			name: "pseudo-version after a tag, dirty tree",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.1-0.20261129124334-5c328be4a94b+dirty"}},
			want: Info{Version: "v0.1.1-0.20261129124334-5c328be4a94b+dirty", Commit: "5c328be4a94b", Modified: true, GoVersion: "go1.26.8", Platform: here},
		},
		{
			name: "go build in a checkout: VCS settings give the full commit, time and modified",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261129124334-5c328be4a94b+dirty"}, Settings: vcs},
			want: Info{Version: "v0.0.0-20261129124334-5c328be4a94b+dirty", Commit: "5c328be4a94b9491676187f7eab3cf8adcb77722",
				CommitTime: "2026-11-29T12:43:34Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"},
		},
		{
			name: "(devel) with no VCS stamp is dev",
			bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			want: Info{Version: "dev", GoVersion: "go1.26.8", Platform: here},
		},
		{
			name:  "the linker stamp wins over the module version; the commit is kept",
			stamp: "v0.2.0",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			want: Info{Version: "v0.2.0", Commit: "5c328be4a94b9491676187f7eab3cf8adcb77722", CommitTime: "2026-11-29T12:43:34Z",
				Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"},
		},
		{
			name:  "a stamp of dev is no stamp",
			stamp: "dev",
			bi:    &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			want:  Info{Version: "v1.2.3", GoVersion: "go1.26.8", Platform: here},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, fromBuildInfo(tc.stamp, tc.bi)); diff != "" {
				t.Errorf("fromBuildInfo (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInfoString(t *testing.T) {
	tests := []struct {
		name string
		in   Info
		want string
	}{
		{"release only", Info{Version: "v1.2.3", GoVersion: "go1.26.8", Platform: "linux/amd64"}, "v1.2.3 (go1.26.8 linux/amd64)"},
		{"full commit is shortened", Info{Version: "v0.2.0", Commit: "5c328be4a94b9491676187f7eab3cf8adcb77722", CommitTime: "2026-11-29T12:43:34Z",
			Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"},
			"v0.2.0 (commit 5c328be4a94b, 2026-11-29T12:43:34Z, modified; go1.26.8 linux/arm64)"},
		{"short commit", Info{Version: "dev", Commit: "5c328be", GoVersion: "go1.26.8", Platform: "linux/amd64"}, "dev (commit 5c328be; go1.26.8 linux/amd64)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.in.String(); got != tc.want {
				t.Errorf("String() = %q, want %q", got, tc.want)
			}
		})
	}
}

// The test binary itself has build info: Get never returns an empty Go version or platform.
func TestGet(t *testing.T) {
	i := Get()
	if i.Version == "" || i.GoVersion == "" || i.Platform == "" {
		t.Errorf("Get() = %+v: version, Go version and platform must be set", i)
	}
}
