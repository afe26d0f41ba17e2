package config

import (
	"strings"
	"testing"
)

// TestCountsHaveMaximums: a count whose size would cost memory (data.count:
// a 16 GB permutation at 2e9) or whose product would overflow (batch_size
// 2^62 x accumulate 4 divided by zero) is refused, naming its key.
func TestCountsHaveMaximums(t *testing.T) {
	for _, tc := range []struct{ set, key string }{
		{"data.count=2000000000", "data.count: 2000000000: at most 1000000"},
		{"train.batch_size=4611686018427387904", "train.batch_size"},
		{"train.accumulate=4611686018427387904", "train.accumulate"},
		{"train.steps=9000000000000000000", "train.steps"},
		{"train.epochs=9000000000000000000", "train.epochs"},
		{"dist.bucket_mb=9000000000000000000", "dist.bucket_mb"},
	} {
		sets := []string{tc.set}
		if strings.HasPrefix(tc.set, "train.epochs") {
			sets = append(sets, "train.steps=0")
		}
		_, err := Parse("x.yaml", nil, sets)
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("--set %s: %v, want an error naming %s", tc.set, err, tc.key)
		}
	}
	for _, set := range []string{"data.count=1000000", "train.batch_size=65536", "train.accumulate=65536", "train.steps=1000000000"} {
		if _, err := Parse("x.yaml", nil, []string{set}); err != nil {
			t.Errorf("--set %s: %v, want it accepted", set, err)
		}
	}
}
