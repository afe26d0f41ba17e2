package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"steps", "steps", 0},
		{"shapse", "shapes", 1},        // a swap
		{"batchsize", "batch_size", 1}, // an insertion
		{"chekpoint", "checkpoint", 1},
		{"kitten", "sitting", 3},
		{"ca", "abc", 3},  // optimal string alignment, not full Damerau (2)
		{"añb", "anb", 1}, // runes, not bytes
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestNearest(t *testing.T) {
	keys := []string{"batch_size", "steps", "epochs", "lr", "val_every"}
	for _, c := range []struct {
		word  string
		cands []string
		want  string
	}{
		{"batchsize", keys, "batch_size"},
		{"BatchSize", keys, "batch_size"},
		{"batch-size", keys, "batch_size"},
		{"step", keys, "steps"},
		{"lr", keys, "lr"},
		{"momentum", keys, ""},        // nothing near
		{"x", []string{"a", "b"}, ""}, // a tie is no answer
		{"shapse", []string{"shapes", "masks"}, "shapes"},
		{"anything", nil, ""},
	} {
		if got := Nearest(c.word, c.cands); got != c.want {
			t.Errorf("Nearest(%q, %v) = %q, want %q", c.word, c.cands, got, c.want)
		}
	}
}
