package predict

import "testing"

// TestCounted: the summary counts in the singular for one, and a NIfTI
// volume as a volume (issue 49: "predicted 1 images" of one volume).
func TestCounted(t *testing.T) {
	out := func(names ...string) []Output {
		var o []Output
		for _, n := range names {
			o = append(o, Output{Input: n})
		}
		return o
	}
	for _, c := range []struct {
		rep  Report
		want string
	}{
		{Report{Images: 0}, "0 images"},
		{Report{Images: 1, Outputs: out("a.png")}, "1 image"},
		{Report{Images: 3, Outputs: out("a.png", "b.png", "c.png")}, "3 images"},
		{Report{Images: 1, Outputs: out("t1.nii.gz")}, "1 volume"},
		{Report{Images: 2, Outputs: out("a.nii", "b.nii.gz")}, "2 volumes"},
		{Report{Images: 3, Outputs: out("a.png", "b.png", "c.nii")}, "2 images and 1 volume"},
	} {
		if got := c.rep.Counted(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.rep.Outputs, got, c.want)
		}
	}
}
