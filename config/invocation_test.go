package config

import "testing"

func TestInvocationCommand(t *testing.T) {
	inv := Invocation{Program: "go run ./cmd/memunet", Config: "configs/quickstart.yaml",
		Sets: []string{"data.path=my data", "data.mask_values=[0, 255]", "train.steps=20"}}
	for _, tc := range []struct{ got, want string }{
		{inv.Command("data check"), `go run ./cmd/memunet data check --config configs/quickstart.yaml --set 'data.path=my data' --set 'data.mask_values=[0, 255]' --set train.steps=20`},
		{inv.Command("plan", "--capacity", "4MiB"), `go run ./cmd/memunet plan --config configs/quickstart.yaml --set 'data.path=my data' --set 'data.mask_values=[0, 255]' --set train.steps=20 --capacity 4MiB`},
		{inv.Run("export", "--checkpoint", "runs/it's"), `go run ./cmd/memunet export --checkpoint 'runs/it'\''s'`},
		{inv.Command("train", "--set", "train.steps=40"), `go run ./cmd/memunet train --config configs/quickstart.yaml --set 'data.path=my data' --set 'data.mask_values=[0, 255]' --set train.steps=40`},
		{Invocation{}.Command("plan"), "memunet plan"},
		{Invocation{Program: "./memunet", Config: "quickstart"}.Command("config list"), "./memunet config list --config quickstart"},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
}

func TestProgramName(t *testing.T) {
	for argv0, want := range map[string]string{
		"/tmp/go-build3612/b001/exe/memunet": "go run ./cmd/memunet",
		"memunet":                            "memunet",
		"./memunet":                          "./memunet",
		"/usr/local/bin/memunet":             "/usr/local/bin/memunet",
	} {
		if got := ProgramName(argv0); got != want {
			t.Errorf("ProgramName(%q) = %q, want %q", argv0, got, want)
		}
	}
}
