package config

import (
	"strings"
	"testing"
)

func TestCheckpointKeys(t *testing.T) {
	c, err := Parse("x.yaml", []byte("train:\n  checkpoint_every: 0\n  keep_last: 0\n  keep_best: false\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Train.CheckpointEvery != 0 || c.Train.KeepLast != 0 || c.Train.KeepBest {
		t.Errorf("parsed %+v", c.Train)
	}
	for _, tc := range []struct{ set, want string }{
		{"train.checkpoint_every=-1", "train.checkpoint_every: -1: must be 0"},
		{"train.keep_last=-2", "train.keep_last: -2: must be 0 (keep every checkpoint) or more"},
		{"train.keep_best=maybe", "train.keep_best"},
	} {
		_, err := Parse("x.yaml", nil, []string{tc.set})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.set, err, tc.want)
		}
	}
}
