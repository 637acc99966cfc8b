package cmd

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/jobsched/jobsched/pkg/version"
)

// versionOutputs are the values of `version -o`; "" is the one line.
var versionOutputs = []string{"json", "yaml"}

func newVersionCmd(g *globalOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit and the Go version of this build",
		Long: `version prints the release this binary was built from: the version stamped by the image build, else the module
version go install recorded (a pseudo-version for a build from a git checkout), with the commit and the Go version.
It reads no configuration and contacts nothing. jobsched --version prints the same line.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return printVersion(g.out, output, version.Get())
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: one line)")
	return cmd
}

func printVersion(out io.Writer, format string, v version.Info) error {
	switch format {
	case "":
		_, err := fmt.Fprintln(out, "jobsched", v.String())
		return err
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		data, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	return usageError{fmt.Errorf("-o: %q is not json or yaml", format)}
}
