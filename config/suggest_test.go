package config

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestKeySuggestions: an unknown key, in a file or from --set, is answered
// with the key meant: the nearest in its section, else one of that name in
// another section, else the nearest anywhere; from --set as the --set to
// paste, with the value given.
func TestKeySuggestions(t *testing.T) {
	for _, c := range []struct {
		name, file string
		sets       []string
		want       string // "" : no "did you mean"
	}{
		{"set: key without its section", "", []string{"steps=100"}, "did you mean --set train.steps=100?"},
		{"set: mistyped key", "", []string{"train.batchsize=4"}, "did you mean --set train.batch_size=4?"},
		{"set: mistyped section", "", []string{"trian.steps=5"}, "did you mean --set train.steps=5?"},
		{"set: key of another section", "", []string{"train.mask_values=[0,1]"}, "did you mean --set 'data.mask_values=[0, 1]'?"},
		{"set: key near one of another section", "", []string{"step=10"}, "did you mean --set train.steps=10?"},
		{"set: a value with a space, quoted", "", []string{"data.pth=my data"}, "did you mean --set 'data.path=my data'?"},
		{"set: a key in three sections", "", []string{"seed=3"}, "did you mean --set model.seed=3 or --set data.seed=3 or --set train.seed=3?"},
		{"file: mistyped key", "train:\n  batchsize: 4\n", nil, `line 2: unknown key "train.batchsize" in train; did you mean train.batch_size?`},
		{"file: key without its section", "steps: 100\n", nil, `line 1: unknown key "steps" in the top level; did you mean train.steps?`},
		{"file: mistyped section", "modle:\n  base: 8\n", nil, `line 1: unknown key "modle" in the top level; did you mean model?`},
		{"file: nothing near", "train:\n  xyzzy: 1\n", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(c.file), c.sets)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if c.want == "" {
				if strings.Contains(msg, "did you mean") {
					t.Errorf("%q: want no suggestion", msg)
				}
			} else if !strings.Contains(msg, c.want) {
				t.Errorf("%q lacks %q", msg, c.want)
			}
			if !strings.Contains(msg, "known keys: ") {
				t.Errorf("%q: want the section's keys still listed", msg)
			}
		})
	}
}

// TestFlagProblem: an unknown flag named as a config key is its --set, on
// a command that takes --set; a mistyped flag is the nearest flag.
func TestFlagProblem(t *testing.T) {
	cmd := func(withSet bool) *flag.FlagSet {
		fs := flag.NewFlagSet("c", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("config", "", "")
		fs.String("checkpoint", "", "")
		fs.Bool("force", false, "")
		if withSet {
			fs.String("set", "", "")
		}
		return fs
	}
	for _, c := range []struct {
		args    []string
		withSet bool
		want    string
	}{
		{[]string{"--config", "q", "--steps", "100"}, true, "unknown flag --steps; did you mean --set train.steps=100?"},
		{[]string{"--steps=100"}, true, "unknown flag --steps; did you mean --set train.steps=100?"},
		{[]string{"-batch-size", "8"}, true, "unknown flag --batch-size; did you mean --set train.batch_size=8?"},
		{[]string{"--nesterov"}, true, "unknown flag --nesterov; did you mean --set train.nesterov=true?"},
		{[]string{"--lr"}, true, "unknown flag --lr; did you mean --set train.lr=VALUE?"},
		{[]string{"--stps", "3"}, true, "unknown flag --stps; did you mean --set train.steps=3?"},
		{[]string{"--chekpoint", "runs/a"}, false, "unknown flag --chekpoint; did you mean --checkpoint?"},
		{[]string{"--forse"}, true, "unknown flag --forse; did you mean --force?"},
		{[]string{"--steps", "100"}, false, "unknown flag --steps"}, // no --set to offer
		{[]string{"--zzzzzz"}, true, "unknown flag --zzzzzz"},
		{[]string{"--config"}, true, "flag needs an argument: -config"},
	} {
		fs := cmd(c.withSet)
		err := fs.Parse(c.args)
		if err == nil {
			t.Fatalf("%v: no error", c.args)
		}
		if got := FlagProblem(fs, c.args, err); got != c.want {
			t.Errorf("%v: %q, want %q", c.args, got, c.want)
		}
	}
}

func TestKeys(t *testing.T) {
	keys := Keys()
	for _, k := range []string{"train.steps", "train.batch_size", "data.path", "device", "data.augment.vflip"} {
		found := false
		for _, got := range keys {
			found = found || got == k
		}
		if !found {
			t.Errorf("Keys() lacks %s", k)
		}
	}
}

// TestNearConfig: a --config that does not exist names the YAML file
// beside it, or the built-in config, nearest it.
func TestNearConfig(t *testing.T) {
	t.Chdir("..") // the module's root: configs/*.yaml
	for _, c := range []struct{ path, want string }{
		{"configs/quikstart.yaml", "did you mean configs/quickstart.yaml? "},
		{"quikstart", "did you mean quickstart? "},
		{"quickstart.yml", "did you mean quickstart.yaml? "},
		{"configs/zzzzzz.yaml", ""},
		{"nowhere/quickstart.yaml", ""},
	} {
		if got := nearConfig(c.path); got != c.want {
			t.Errorf("nearConfig(%s) = %q, want %q", c.path, got, c.want)
		}
	}
	if _, err := Load("configs/quikstart.yaml", nil); err == nil || !strings.Contains(err.Error(), "does not exist; did you mean configs/quickstart.yaml? pass an existing file") {
		t.Errorf("Load: %v", err)
	}
}
