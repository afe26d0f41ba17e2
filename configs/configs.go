// Package configs holds memunet's commented example configs, the *.yaml
// files in this directory: quickstart (the documented starting point, every
// key with its default and meaning), one per memory-saving variant
// (baseline, checkpoint, fp16, bf16, accum4, all), finetune (a new head
// on a trained run, CE + Dice, cosine, augmentation), nnunet2d (nnU-Net's
// 2D recipe: SGD with Nesterov momentum, the poly schedule, gradient
// clipping, CE + Dice, instance norm) and volumes (a 3D UNet on the
// synthetic volumes). They are embedded in the
// binary so that "memunet config print NAME" gives a user a starting config
// without a checkout of the repository.
package configs

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.yaml
var files embed.FS

// Default is the config "memunet config print" prints without a name.
const Default = "quickstart"

// Names lists the embedded configs by name (the file name without .yaml):
// Default first, then the others in alphabetical order.
func Names() []string {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err) // the embedded directory is always readable
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && name != Default {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return append([]string{Default}, names...)
}

// Read returns the exact text, comments included, of the config called name
// (a name from Names; a trailing ".yaml" is accepted). An unknown name is an
// error that lists the names.
func Read(name string) ([]byte, error) {
	name = strings.TrimSuffix(name, ".yaml")
	if slices.Contains(Names(), name) {
		return files.ReadFile(name + ".yaml")
	}
	return nil, fmt.Errorf("unknown config %q; the configs are %s", name, strings.Join(Names(), ", "))
}

// Describe is the one-line description of the config called name: its
// first comment line, "# memunet WHAT: DESCRIPTION.", from DESCRIPTION.
func Describe(name string) (string, error) {
	src, err := Read(name)
	if err != nil {
		return "", err
	}
	first, _, _ := strings.Cut(string(src), "\n")
	_, d, ok := strings.Cut(first, ": ")
	if !ok || d == "" {
		return "", fmt.Errorf("config %s: its first line is not \"# memunet WHAT: DESCRIPTION.\"", name)
	}
	return strings.ToUpper(d[:1]) + d[1:], nil
}
